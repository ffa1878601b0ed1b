//! The Containerfile (registry builds) and deploy/dev/build-images.sh (the offline build the
//! real node tier imports) make the same lvms image: the same Debian packages, the same
//! entrypoint and user. A change to one without the other fails here.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::BTreeSet;
use std::path::Path;

fn read(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The packages of the Containerfile's `apt-get install` (its flags left out).
fn containerfile_packages(text: &str) -> BTreeSet<String> {
    let joined = text.replace("\\\n", " ");
    let line = joined
        .lines()
        .find(|l| l.contains("apt-get install"))
        .expect("an apt-get install line");
    let after = line.split("apt-get install").nth(1).unwrap();
    after
        .split("&&")
        .next()
        .unwrap()
        .split_whitespace()
        .filter(|w| !w.starts_with('-'))
        .map(String::from)
        .collect()
}

fn script_packages(text: &str) -> BTreeSet<String> {
    let line = text
        .lines()
        .find(|l| l.starts_with("PACKAGES=("))
        .expect("PACKAGES=( in build-images.sh");
    line.trim_start_matches("PACKAGES=(")
        .trim_end_matches(')')
        .split_whitespace()
        .map(String::from)
        .collect()
}

fn value<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix}"))
        .trim()
}

#[test]
fn the_containerfile_and_the_offline_build_make_the_same_image() {
    let cf = read("Containerfile");
    let sh = read("deploy/dev/build-images.sh");
    let (a, b) = (containerfile_packages(&cf), script_packages(&sh));
    assert!(
        a.contains("lvm2") && a.contains("thin-provisioning-tools"),
        "{a:?}"
    );
    assert_eq!(a, b, "Containerfile vs build-images.sh packages");
    assert_eq!(
        value(&cf, "ENTRYPOINT "),
        value(&sh, "ENTRYPOINT=").trim_matches('\''),
        "entrypoint"
    );
    let user = value(&cf, "USER ");
    let uid = value(&sh, "USER_ID=");
    assert_eq!(user, format!("{uid}:{uid}"), "user");
}

#[test]
fn the_parsers_read_what_they_are_given() {
    let cf = "RUN apt-get update \\\n && apt-get install -y --no-install-recommends \\\n      a b \\\n && rm -rf x\n";
    assert_eq!(
        containerfile_packages(cf),
        ["a", "b"].into_iter().map(String::from).collect()
    );
    assert_eq!(
        script_packages("PACKAGES=(x y z)\n"),
        ["x", "y", "z"].into_iter().map(String::from).collect()
    );
}
