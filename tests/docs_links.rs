//! Every relative link in README.md and docs/ resolves: the file exists, and a `#fragment`
//! names a heading of that file (GitHub's anchors: lower case, punctuation dropped, spaces to
//! dashes, repeats numbered). External links (scheme or `mailto:`) are not followed.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap().path();
        if p.is_dir() {
            markdown_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

/// GitHub's anchor of a heading text.
fn slug(heading: &str) -> String {
    let text = heading.replace('`', "");
    // Link text stands for the link in a heading.
    let text = strip_links(&text);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn strip_links(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('[') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        match after
            .find("](")
            .and_then(|j| after[j..].find(')').map(|k| (j, j + k)))
        {
            Some((j, end)) => {
                out.push_str(&after[..j]);
                rest = &after[end + 1..];
            }
            None => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Text outside fenced code blocks, line by line.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for line in prose(text) {
        let Some(h) = line.strip_prefix('#') else {
            continue;
        };
        let h = h.trim_start_matches('#');
        if !h.starts_with(' ') {
            continue;
        }
        let base = slug(h);
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The targets of inline links `[text](target)` outside code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        // Inline code spans may hold brackets that are not links.
        let line: String = line.split('`').step_by(2).collect::<Vec<_>>().join("");
        let mut rest = line.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push(target.to_string());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    markdown_files(&root.join("docs"), &mut files);
    assert!(files.len() > 5, "docs/ is missing: {files:?}");
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for target in links(&text) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let dest = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !dest.exists() {
                broken.push(format!("{}: {target}: no such file", file.display()));
                continue;
            }
            if let Some(f) = fragment
                && dest.extension().is_some_and(|x| x == "md")
                && !anchors(&std::fs::read_to_string(&dest).unwrap()).contains(f)
            {
                broken.push(format!("{}: {target}: no such heading", file.display()));
            }
        }
    }
    println!("{checked} relative links in {} files", files.len());
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_follow_githubs_rules() {
    let a = anchors(
        "# The two commands\n## `lvms explain` and `must-gather`\n# Tests\n# Tests\n```\n# not a heading\n```\n",
    );
    let want: BTreeSet<String> = [
        "the-two-commands",
        "lvms-explain-and-must-gather",
        "tests",
        "tests-1",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(a, want);
    assert_eq!(links("see [a](docs/a.md#x) and `[b](no)`"), ["docs/a.md#x"]);
}

#[test]
fn the_readme_is_a_newcomers_guide() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        text.len() <= 12_288,
        "README.md is {} bytes: keep it near 12 KB, subjects go to docs/",
        text.len()
    );
    // Install and troubleshooting are within the first screen (the table of contents).
    let first_screen: String = text.lines().take(40).collect::<Vec<_>>().join("\n");
    for section in ["#install", "#troubleshooting"] {
        assert!(
            first_screen.contains(section),
            "{section} is not linked from the first screen"
        );
    }
    for needle in ["make demo", "make test"] {
        assert!(text.contains(needle), "the README does not give `{needle}`");
    }
}
