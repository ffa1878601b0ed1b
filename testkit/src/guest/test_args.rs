//! libtest's command line, for test binaries with their own harness (`harness = false`), such
//! as the real-kernel group that boots one guest for all its scenarios.

/// The arguments such a harness honours: name filters (substring, or whole with `--exact`),
/// `--skip`, `--list`. The others (`--nocapture`, `--test-threads N`, ...) are accepted and
/// mean nothing there.
#[derive(Debug, Default)]
pub struct TestArgs {
    pub filters: Vec<String>,
    pub skip: Vec<String>,
    pub exact: bool,
    pub list: bool,
    /// `--kernel K` (not libtest's): only the scenarios the harness's table runs on kernel K.
    pub kernel: Option<String>,
}

impl TestArgs {
    pub fn parse(mut args: impl Iterator<Item = String>) -> Self {
        let mut a = TestArgs::default();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--exact" => a.exact = true,
                "--list" => a.list = true,
                "--skip" => a.skip.extend(args.next()),
                "--kernel" => a.kernel = args.next(),
                // Flags that take a value: the value is not a filter.
                "--test-threads" | "--format" | "--color" | "--logfile" | "-Z" => {
                    args.next();
                }
                f if f.starts_with('-') => {}
                name => a.filters.push(name.to_string()),
            }
        }
        a
    }

    /// Whether the test `name` runs.
    pub fn selects(&self, name: &str) -> bool {
        let hit = |f: &String| {
            if self.exact {
                name == f
            } else {
                name.contains(f.as_str())
            }
        };
        (self.filters.is_empty() || self.filters.iter().any(hit)) && !self.skip.iter().any(hit)
    }
}

/// What a harness whose tests build on earlier ones runs: `table` is (name, names it needs),
/// in run order; the answer is (index into `table`, chosen), in table order, the chosen
/// tests and, transitively, what they need that was not chosen.
pub fn with_needs(table: &[(&str, &[&str])], chosen: impl Fn(&str) -> bool) -> Vec<(usize, bool)> {
    let mut wanted: Vec<usize> = (0..table.len()).filter(|&i| chosen(table[i].0)).collect();
    let mut next = 0;
    while let Some(&i) = wanted.get(next) {
        for need in table[i].1 {
            if let Some(j) = table.iter().position(|(n, _)| n == need)
                && !wanted.contains(&j)
            {
                wanted.push(j);
            }
        }
        next += 1;
    }
    wanted.sort_unstable();
    wanted
        .into_iter()
        .map(|i| (i, chosen(table[i].0)))
        .collect()
}

/// Prints a custom harness's results as libtest does (each test's line, the failures, the
/// summary line run-tests.sh counts); true when none failed.
pub fn report<N: std::fmt::Display>(
    results: &[(N, Result<(), String>)],
    filtered: usize,
    started: std::time::Instant,
) -> bool {
    for (name, r) in results {
        println!(
            "test {name} ... {}",
            if r.is_ok() { "ok" } else { "FAILED" }
        );
    }
    let failures: Vec<_> = results
        .iter()
        .filter_map(|(name, r)| r.as_ref().err().map(|why| (name, why)))
        .collect();
    if !failures.is_empty() {
        println!("\nfailures:\n");
        for (name, why) in &failures {
            println!("---- {name} ----\n{why}\n");
        }
    }
    let passed = results.len() - failures.len();
    println!(
        "\ntest result: {}. {passed} passed; {} failed; 0 ignored; 0 measured; {filtered} filtered out; finished in {:.2}s\n",
        if failures.is_empty() { "ok" } else { "FAILED" },
        failures.len(),
        started.elapsed().as_secs_f64()
    );
    failures.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chosen_tests_bring_what_they_need_transitively_in_table_order() {
        let table: &[(&str, &[&str])] = &[
            ("install", &[]),
            ("data", &[]),
            ("other", &[]),
            ("stats", &["data"]),
            ("reboot", &["stats"]),
            ("teardown", &[]),
        ];
        let p = with_needs(table, |n| ["install", "reboot", "teardown"].contains(&n));
        assert_eq!(p, [(0, true), (1, false), (3, false), (4, true), (5, true)]);
        // Chosen and needed: reported once, as chosen.
        let p = with_needs(table, |n| n == "stats" || n == "data");
        assert_eq!(p, [(1, true), (3, true)]);
        // A need that is no test of the table is ignored.
        assert_eq!(with_needs(&[("a", &["gone"])], |_| true), [(0, true)]);
    }

    fn args(a: &[&str]) -> TestArgs {
        TestArgs::parse(a.iter().map(|s| s.to_string()))
    }

    #[test]
    fn filters_select_as_libtest_does() {
        assert!(args(&[]).selects("thin"));
        assert!(args(&["--nocapture"]).selects("thin"));
        assert!(args(&["raid"]).selects("raid-lost"));
        assert!(!args(&["raid"]).selects("thin"));
        assert!(!args(&["raid", "--exact"]).selects("raid-lost"));
        assert!(args(&["raid1", "--exact"]).selects("raid1"));
        assert!(!args(&["--skip", "crash"]).selects("thin-crash"));
        assert!(args(&["--skip", "crash"]).selects("thin"));
        assert!(args(&["--test-threads", "2", "raid1"]).selects("raid1"));
        assert!(!args(&["--test-threads", "2", "raid1"]).selects("thin"));
        assert!(args(&["--list"]).list);
        let k = args(&["--list", "--kernel", "6.12", "raid"]);
        assert_eq!(k.kernel.as_deref(), Some("6.12"));
        assert!(k.selects("raid1") && !k.selects("thin"));
    }
}
