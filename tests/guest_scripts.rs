//! The real-kernel tier's guest-side shell (`tests/guest/scripts/`, run by dash in the guest):
//! every file parses with `dash -n`, alone and as a function body (how node.sh receives a
//! scenario's `prepare` and `after_ready`); shellcheck (`-s sh`; `make test-deps` installs it) finds nothing
//! but what a file excuses in a `# shellcheck disable=...` comment saying why; each file's
//! opening comment names every variable it reads and does not set; every file is embedded by
//! the tier; and the header the tier writes before a program (`tests/guest/script.rs`) hands
//! any value over unchanged.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "guest/script.rs"]
mod script;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use script::{Script, quote};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/guest/scripts")
}

/// Every file of the directory: (name, text).
fn scripts() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(dir())
        .unwrap_or_else(|e| panic!("{}: {e}", dir().display()))
        .map(|e| e.unwrap().path())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, text)
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no scripts in {}", dir().display());
    out
}

/// dash with `args`, its script on stdin when `stdin` is given. The guest runs every job under
/// dash, so a machine without it cannot check them: that fails, it never passes quietly.
fn dash(args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write as _;
    let mut child = Command::new("dash")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("dash is missing ({e}): the guest scripts run under dash; install it (apt-get install dash)")
        });
    let mut input = child.stdin.take().unwrap();
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

#[test]
fn every_script_parses_with_dash_alone_and_as_a_function_body() {
    let mut bad = Vec::new();
    for (name, text) in scripts() {
        assert!(name.ends_with(".sh"), "{name}: not a .sh file");
        let alone = dash(&["-n"], Some(&text));
        if !alone.status.success() {
            bad.push(format!(
                "{name}: {}",
                String::from_utf8_lossy(&alone.stderr)
            ));
        }
        let wrapped = Script::new().func("body", &text).then("body\n");
        let as_body = dash(&["-n"], Some(&wrapped));
        if !as_body.status.success() {
            bad.push(format!(
                "{name} as a function body: {}",
                String::from_utf8_lossy(&as_body.stderr)
            ));
        }
    }
    assert!(bad.is_empty(), "dash -n:\n{}", bad.join("\n"));
}

#[test]
fn shellcheck_finds_nothing_unexcused() {
    let version = Command::new("shellcheck").arg("--version").output();
    assert!(
        version.is_ok_and(|o| o.status.success()),
        "shellcheck is not installed, so the guest scripts cannot be linted: apt-get install -y shellcheck (make test-deps does)"
    );
    let files: Vec<String> = scripts().into_iter().map(|(name, _)| name).collect();
    // Every exclusion is a `# shellcheck disable=` comment in the file, next to its reason;
    // none is made here.
    let out = Command::new("shellcheck")
        .args(["-s", "sh", "-f", "gcc"])
        .args(&files)
        .current_dir(dir())
        .output()
        .expect("shellcheck");
    assert!(
        out.status.success(),
        "shellcheck -s sh:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The file's opening comment block.
fn header(text: &str) -> String {
    text.lines()
        .take_while(|l| l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Upper-case variables the code reads as `$NAME` or `${NAME...}`, outside comments and
/// single quotes (awk's `$NF`), and those it assigns (`NAME=`).
fn variables(text: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut read, mut set) = (BTreeSet::new(), BTreeSet::new());
    let name_at = |s: &[u8], i: usize| -> String {
        s[i..]
            .iter()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || **c == b'_')
            .map(|c| *c as char)
            .collect()
    };
    for line in text.lines() {
        let b = line.as_bytes();
        let (mut single, mut double) = (false, false);
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            match c {
                b'\\' if !single => i += 1,
                b'\'' if !double => single = !single,
                b'"' if !single => double = !double,
                b'#' if !single && !double && (i == 0 || b[i - 1] == b' ') => break,
                b'$' if !single => {
                    let at = if b.get(i + 1) == Some(&b'{') {
                        i + 2
                    } else {
                        i + 1
                    };
                    let name = name_at(b, at);
                    if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                        read.insert(name);
                    }
                }
                _ if !single
                    && !double
                    && c.is_ascii_uppercase()
                    && (i == 0 || b" ;(\t".contains(&b[i - 1])) =>
                {
                    let name = name_at(b, i);
                    if b.get(i + name.len()) == Some(&b'=') {
                        set.insert(name);
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
    (read, set)
}

#[test]
fn each_script_names_the_variables_it_expects_in_its_opening_comment() {
    let mut missing = Vec::new();
    for (name, text) in scripts() {
        let head = header(&text);
        assert!(
            head.lines().count() >= 3,
            "{name} opens with no comment block saying what it does and expects"
        );
        let words: BTreeSet<&str> = head
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .collect();
        let (read, set) = variables(&text);
        for var in read.difference(&set) {
            if !words.contains(var.as_str()) {
                missing.push(format!("{name}: ${var}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "read but neither set nor named in the file's opening comment:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_script_is_embedded_by_the_tier() {
    let guest = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/guest");
    let rust: String = std::fs::read_dir(&guest)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    for (name, _) in scripts() {
        assert!(
            rust.contains(&format!("include_str!(\"scripts/{name}\")")),
            "tests/guest/scripts/{name} is embedded nowhere in tests/guest"
        );
    }
}

#[test]
fn the_header_hands_every_value_over_unchanged() {
    let values = [
        "",
        "plain",
        "two words",
        "it's",
        "'",
        "''",
        "\"double\" and 'single'",
        "$HOME ${x:-y} $(echo no) `echo no`",
        "back\\slash\\",
        "* ? [a-z] ~",
        "line\nbreak\n",
        "; exit 9 # &|<>",
        "[Ss]napshot|existing source volume",
        "hold=applied:volumes#hold-gates snap=applied:volumes#lvcreate-snapshot",
    ];
    let mut s = Script::new();
    for (i, v) in values.iter().enumerate() {
        s = s.var(&format!("V{i}"), v);
    }
    let program: String = (0..values.len())
        .map(|i| format!("printf '%s\\0' \"$V{i}\"\n"))
        .collect();
    let out = dash(&["-s"], Some(&s.then(&program)));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = String::from_utf8(out.stdout).unwrap();
    let got: Vec<&str> = got.split_terminator('\0').collect();
    assert_eq!(got, values, "the values as the script reads them");
    // Exported: a child process sees them too.
    let child = dash(
        &["-s"],
        Some(
            &Script::new()
                .var("X", "a'b c")
                .then("dash -c 'printf %s \"$X\"'\n"),
        ),
    );
    assert_eq!(String::from_utf8_lossy(&child.stdout), "a'b c");
    assert_eq!(quote("it's"), r"'it'\''s'");
}

#[test]
fn functions_run_their_body_and_an_empty_one_does_nothing() {
    let script = Script::new()
        .var("WHO", "world")
        .func("greet", "# a file's opening comment\necho \"hello $WHO\"")
        .func("nothing", "")
        .func("comment_only", "  \n")
        .then("nothing\ncomment_only\ngreet\n");
    let out = dash(&["-s"], Some(&script));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello world\n");
}

#[test]
#[should_panic(expected = "not a shell variable name")]
fn a_variable_name_is_checked() {
    let _ = Script::new().var("A-B", "x");
}

/// The sanity scenario's optional skip: absent when empty, one argument when set (as
/// `${SANITY_SKIP:+"--ginkgo.skip=$SANITY_SKIP"}` in sanity.sh).
#[test]
fn an_optional_argument_is_one_word_or_none() {
    for (skip, want) in [
        ("", "0\n"),
        (
            "[Ss]napshot|existing source volume",
            "1 --ginkgo.skip=[Ss]napshot|existing source volume\n",
        ),
    ] {
        let script = Script::new()
            .var("SANITY_SKIP", skip)
            .then("set -- ${SANITY_SKIP:+\"--ginkgo.skip=$SANITY_SKIP\"}\necho \"$#${1:+ $1}\"\n");
        let out = dash(&["-s"], Some(&script));
        assert_eq!(String::from_utf8_lossy(&out.stdout), want, "skip {skip:?}");
    }
}
