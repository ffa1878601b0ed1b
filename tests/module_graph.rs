//! The module dependency graph of each crate, and of each folder in it, is a DAG: no two
//! modules side by side (a crate's top-level modules; the files and subfolders of one folder)
//! use each other, directly or through others (api / journal / node at the bottom, then actors
//! and kube, then operator / vgmanager, then cli; inside a folder, e.g. `node/` → `vg/`,
//! `volume/` over `report`, `commands`).
//!
//! A module's edges are the `crate::<m>` paths its non-test code names (and `super::<m>` where
//! `super` is the crate root); `#[cfg(test)] mod tests` blocks are left out, since a test may
//! reach anywhere. Run: `cargo test --test module_graph` (it prints every cycle it finds).
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The child module of `dir` a file belongs to (`None` for `dir`'s own root files: `lib.rs`,
/// `main.rs`, `mod.rs`).
fn child_module(dir: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(dir).ok()?;
    let first = rel.components().next()?.as_os_str().to_string_lossy();
    let name = first.trim_end_matches(".rs").to_string();
    (!matches!(name.as_str(), "lib" | "main" | "mod")).then_some(name)
}

/// Whether `super::` in `file` names `dir`'s module: `dir/x.rs` and `dir/x/mod.rs`.
fn super_is(dir: &Path, file: &Path) -> bool {
    match file.parent() {
        Some(p) if p == dir => !matches!(
            file.file_name().and_then(|n| n.to_str()),
            Some("mod.rs" | "lib.rs" | "main.rs")
        ),
        Some(p) => p.parent() == Some(dir) && file.file_name().is_some_and(|n| n == "mod.rs"),
        None => false,
    }
}

/// Source without `#[cfg(test)]` items (a `mod tests { ... }` block or one item).
fn without_tests(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        // Skip to the end of the next item: its brace block, or its `;`.
        let (brace, semi) = (after.find('{'), after.find(';'));
        let end = match (brace, semi) {
            (Some(b), Some(s)) if s < b => s + 1,
            (Some(b), _) => {
                let mut depth = 0usize;
                let mut end = after.len();
                for (j, c) in after[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + j + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, Some(s)) => s + 1,
            (None, None) => after.len(),
        };
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first path segment after each `prefix` (`crate::` or `super::`), through `{a, b::c}`.
fn segments_after(src: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = src;
    while let Some(i) = rest.find(prefix) {
        // Not part of a longer identifier (e.g. `foo_crate::`).
        let ok = rest[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        rest = &rest[i + prefix.len()..];
        if !ok {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1usize;
            let mut item_start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => item_start = true,
                    c if item_start && depth == 1 && !c.is_whitespace() => {
                        item_start = false;
                        let id = ident_at(&group[j..]);
                        if !id.is_empty() {
                            out.insert(id.to_string());
                        }
                    }
                    _ => {}
                }
            }
        } else {
            let id = ident_at(rest);
            if !id.is_empty() {
                out.insert(id.to_string());
            }
        }
    }
    out
}

/// The graph of `dir`'s child modules; `path` is `dir`'s module path (`crate::` for a crate's
/// root, `crate::node::` for `src/node/`).
fn graph(dir: &Path, path: &str) -> Graph {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| child_module(dir, f)).collect();
    let mut g = Graph::new();
    for f in &files {
        let Some(from) = child_module(dir, f) else {
            continue;
        };
        let text = std::fs::read_to_string(f).expect("read source");
        // Comments (doc links included) name modules without using them.
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let src = without_tests(&code);
        let mut names = segments_after(&src, path);
        if super_is(dir, f) {
            names.extend(segments_after(&src, "super::"));
        }
        let edges = g.entry(from.clone()).or_default();
        for n in names {
            if n != from && modules.contains(&n) {
                edges.insert(n);
            }
        }
    }
    g
}

/// Every folder under `dir` that is a module (its own graph), with its module path.
fn folders(dir: &Path, path: &str, out: &mut Vec<(PathBuf, String)>) {
    out.push((dir.to_path_buf(), path.to_string()));
    let mut subdirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_dir())
        .collect();
    subdirs.sort();
    for sub in subdirs {
        let name = sub
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        folders(&sub, &format!("{path}{name}::"), out);
    }
}

/// Strongly connected components with more than one module (Tarjan).
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        if let Some(ws) = t.g.get(v) {
            for w in ws {
                let w = w.as_str();
                if !t.index.contains_key(w) {
                    visit(t, w);
                    let lw = t.low[w];
                    let lv = t.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if t.on.contains(w) {
                    let iw = t.index[w];
                    let lv = t.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
        }
        if t.low[v] == t.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                scc.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                t.out.push(scc);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// Who uses whom inside one cycle, for the failure message.
fn describe(g: &Graph, scc: &[String]) -> String {
    scc.iter()
        .map(|m| {
            let to: Vec<&str> = g[m]
                .iter()
                .filter(|n| scc.contains(n))
                .map(String::as_str)
                .collect();
            format!("{m} -> {}", to.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[test]
fn no_crate_has_a_module_import_cycle() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    let mut checked = 0;
    for krate in ["src", "actors/src", "journal/src"] {
        let mut all = Vec::new();
        folders(&base.join(krate), "crate::", &mut all);
        for (dir, path) in all {
            let g = graph(&dir, &path);
            checked += 1;
            for scc in cycles(&g) {
                found.push(format!(
                    "{} ({path}): {}",
                    dir.display(),
                    describe(&g, &scc)
                ));
            }
        }
    }
    println!("{checked} folders checked");
    assert!(checked > 10, "the folders were not found");
    assert!(
        found.is_empty(),
        "module import cycles:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checker_sees_cycles_and_grouped_imports() {
    let src = "use crate::{a, b::{c, d}, e::f};\nfn x() { super::g::h(); }\n#[cfg(test)]\nmod tests { use crate::z; }";
    let names = segments_after(&without_tests(src), "crate::");
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        vec!["a", "b", "e"],
        "test-only imports are left out"
    );
    let mut g = Graph::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    g.entry("c".into()).or_default().insert("a".into());
    g.entry("d".into()).or_default().insert("a".into());
    assert_eq!(cycles(&g), vec![vec!["a", "b", "c"]]);
    g.get_mut("c").expect("c").clear();
    assert!(cycles(&g).is_empty());
}
