//! Fuzzing on stable Rust, bounded in time, in the README's test command: each target's
//! committed corpus (`tests/fuzz/<target>/`, plus the captured lvm2 and lsblk outputs it
//! starts from) is replayed, then mutated at random (bit flips, byte edits, cuts, repeats,
//! splices, and tokens a parser meets at its edges) for `LVMS_FUZZ_SECS` seconds per target
//! (default 3). A target answers every input with a value or an error; a panic fails the test,
//! names the seed (`LVMS_FUZZ_SEED` replays the run) and writes the input into the corpus as
//! `crash-<hash>`, where it stays, once fixed, as a regression case. The journal decoder is fed
//! whole frames (almost all stop at the checksum) and payloads framed with a valid checksum
//! (which reach bincode and the record's own checks).
//!
//! Without coverage feedback this finds less than cargo-fuzz would; it runs on stable, on
//! every test run, with nothing to install. For a long, guided run see docs/testing.md.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lvms::csi::node::mountinfo;
use lvms::node::{lsblk, lvmd_config, report};
use lvms_journal::codec::{decode_record, encode_record, frame};
use lvms_journal::{Body, Intent, ObjectRef, Record, Trace};

/// xorshift64*: small, seedable, and the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// What parsers meet at their edges: JSON structure, numbers past every width, lvm2's and
/// lsblk's units and separators, a NUL, an invalid UTF-8 byte.
const TOKENS: &[&[u8]] = &[
    b"\"",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"null",
    b"\"\"",
    b"-1",
    b"18446744073709551616",
    b"9223372036854775807",
    b"1e308",
    b"NaN",
    b"-0",
    b"0.",
    b"B",
    b"%",
    b"\\u0000",
    b"\0",
    b"\xff",
    b"\n",
    b" - ",
    b"/dev/",
];

fn mutate(rng: &mut Rng, base: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut b = base.to_vec();
    for _ in 0..=rng.below(4) {
        let len = b.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                b[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                b[i] = rng.next() as u8;
            }
            2 if len > 0 => {
                let from = rng.below(len);
                let to = (from + 1 + rng.below(16)).min(len);
                b.drain(from..to);
            }
            3 if len > 0 => {
                let from = rng.below(len);
                let to = (from + 1 + rng.below(64)).min(len);
                let piece = b[from..to].to_vec();
                let at = rng.below(len);
                b.splice(at..at, piece);
            }
            4 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                let at = rng.below(len + 1);
                b.splice(at..at, token.iter().copied());
            }
            5 if !corpus.is_empty() => {
                let other = &corpus[rng.below(corpus.len())];
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                b.truncate(cut);
                b.extend_from_slice(&other[from..]);
            }
            _ => {
                let token = TOKENS[rng.below(TOKENS.len())];
                if len > 0 {
                    let at = rng.below(len);
                    let end = (at + token.len()).min(len);
                    b.splice(at..end, token.iter().copied());
                }
            }
        }
    }
    b
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// The target's corpus: its committed inputs and the captured outputs it starts from.
fn corpus(target: &str, fixtures: &[&str]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let dir = root().join("fuzz").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .collect();
    files.sort();
    for f in files {
        out.push(std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display())));
    }
    for name in fixtures {
        let path = root().join("fixtures/lvm2").join(name);
        out.push(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    }
    assert!(!out.is_empty(), "target {target} has no corpus");
    out
}

fn budget() -> Duration {
    let secs = std::env::var("LVMS_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(3.0);
    Duration::from_secs_f64(secs)
}

fn seed() -> u64 {
    std::env::var("LVMS_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
        | 1
}

/// FNV-1a: a stable name for a crashing input.
fn hash(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, x| {
        (h ^ u64::from(*x)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Replays the corpus, then mutates it for the budget; fails on the first panic, keeping the
/// input. Returns how many inputs ran.
fn fuzz(target: &str, seeds: Vec<Vec<u8>>, check: impl Fn(&[u8])) -> u64 {
    fuzz_in(&root().join("fuzz").join(target), target, seeds, check)
}

/// [`fuzz`], keeping a crashing input in `dir`.
fn fuzz_in(dir: &Path, target: &str, seeds: Vec<Vec<u8>>, check: impl Fn(&[u8])) -> u64 {
    let seed = seed();
    let mut rng = Rng(seed);
    let run = |input: &[u8]| {
        if catch_unwind(AssertUnwindSafe(|| check(input))).is_err() {
            let path = dir.join(format!("crash-{:016x}", hash(input)));
            let _ = std::fs::write(&path, input);
            panic!(
                "fuzz target {target} panicked (LVMS_FUZZ_SEED={seed}); the input is kept in {}",
                path.display()
            );
        }
    };
    for s in &seeds {
        run(s);
    }
    let started = Instant::now();
    let mut n = seeds.len() as u64;
    let limit = budget();
    while started.elapsed() < limit {
        for _ in 0..64 {
            let base = &seeds[rng.below(seeds.len())];
            run(&mutate(&mut rng, base, &seeds));
            n += 1;
        }
    }
    println!(
        "{target}: {n} inputs in {:?} (LVMS_FUZZ_SEED={seed})",
        started.elapsed()
    );
    n
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn lvm2_reports() {
    let seeds = corpus(
        "lvm2",
        &[
            "lvs_empty.json",
            "lvs_linear.json",
            "lvs_raid1.json",
            "lvs_thin.json",
            "pvs.json",
            "vgs_tagged.json",
            "vgs_with_free.json",
        ],
    );
    let n = fuzz("lvm2", seeds, |b| {
        let t = text(b);
        let _ = report::parse_lvs(&t);
        let _ = report::parse_pvs(&t);
        let _ = report::parse_vgs(&t);
        for line in t.lines() {
            let _ = report::LvAttr::parse(line);
        }
    });
    assert!(n > 7, "the corpus and at least one mutation ran");
}

#[test]
fn lsblk_blkid_and_losetup() {
    let seeds = corpus(
        "lsblk",
        &[
            "lsblk_loops.json",
            "lsblk_mountpoints.json",
            "lsblk_partitions.json",
            "losetup_back_file.json",
            "blkid_dos_pttype.txt",
            "blkid_ext4.txt",
            "blkid_lvm2_member.txt",
        ],
    );
    fuzz("lsblk", seeds, |b| {
        let t = text(b);
        let _ = lsblk::parse_lsblk(&t);
        let _ = lsblk::parse_losetup_back_files(&t);
        let _ = lsblk::parse_blkid_export(&t);
    });
}

#[test]
fn lvmd_config_and_mountinfo() {
    let seeds = corpus("lvmd-mountinfo", &[]);
    fuzz("lvmd-mountinfo", seeds, |b| {
        let t = text(b);
        if let Ok(config) = lvmd_config::parse(&t) {
            // What is accepted writes out and reads back the same.
            let written = lvmd_config::render(&config).expect("an accepted config writes out");
            assert_eq!(lvmd_config::parse(&written).ok(), Some(config));
        }
        let _ = mountinfo::parse(&t);
    });
}

/// A record as the journal writes it: the seed the payload mutations start from.
fn intent_record() -> Vec<u8> {
    let record = Record {
        seq: 42,
        at_ms: 1_764_000_000_000,
        trace: Trace::default(),
        body: Body::Intent(Intent {
            unit: "volumes".into(),
            object: ObjectRef {
                kind: "LogicalVolume".into(),
                namespace: String::new(),
                name: "pvc-1".into(),
                uid: "u-1".into(),
                generation: 1,
            },
            action: "lvcreate".into(),
            args: vec!["/usr/sbin/lvcreate".into(), "-n".into(), "u-1".into()],
            desired_digest: "d".into(),
            idempotency_key: "k".into(),
            lease_epoch: 3,
            regarding: vec![ObjectRef::default()],
        }),
    };
    encode_record(&record).expect("encode")
}

#[test]
fn journal_records() {
    let mut seeds = corpus("journal", &[]);
    seeds.push(intent_record());
    fuzz("journal", seeds, |b| {
        // As stored (the checksum stops almost every mutation)...
        let _ = decode_record(b);
        // ...and framed with a valid checksum, so bincode and the record's checks see it.
        let payload = b.get(9..).unwrap_or(b);
        if let Ok(r) = decode_record(&frame(payload)) {
            // What decodes encodes again to a record that decodes the same.
            let again = encode_record(&r).expect("a decoded record encodes");
            assert_eq!(decode_record(&again).ok(), Some(r));
        }
    });
}

/// The harness itself: a target that panics on one token is caught within the budget, the run
/// fails naming its seed, and the input that did it is kept.
#[test]
fn a_panicking_target_fails_the_run_and_keeps_its_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seeds = vec![br#"{"report": [{"lv": []}]}"#.to_vec()];
    let failed = catch_unwind(AssertUnwindSafe(|| {
        fuzz_in(dir.path(), "selftest", seeds, |b| {
            assert!(!b.windows(3).any(|w| w == b"NaN"), "found NaN");
        })
    }));
    let message = failed
        .expect_err("the planted panic is found")
        .downcast::<String>()
        .map(|s| *s)
        .unwrap_or_default();
    assert!(message.contains("LVMS_FUZZ_SEED="), "{message}");
    let kept: Vec<_> = std::fs::read_dir(dir.path())
        .expect("crash dir")
        .map(|e| std::fs::read(e.expect("entry").path()).expect("kept input"))
        .collect();
    assert_eq!(kept.len(), 1, "one input kept");
    assert!(
        kept[0].windows(3).any(|w| w == b"NaN"),
        "the kept input is the one that panicked"
    );
}
