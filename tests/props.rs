//! Property tests of the parsers and checks at lvms's boundaries: whatever a CSI client, lvm2,
//! lsblk, the mount table or an lvmd.yaml hands them, they answer (a value or a precise error)
//! and never panic, and what they accept keeps its invariant. The inputs are arbitrary values
//! and the captured real outputs (tests/fixtures/lvm2) with bytes overwritten at random.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use lvms::csi::controller::service::parse_grpc_timeout;
use lvms::csi::controller::sizing::{MAX_BYTES, requested_bytes};
use lvms::csi::node::mountinfo;
use lvms::csi::node::publish::host_path;
use lvms::csi::object_name::{MAX_LEN, object_name};
use lvms::node::{lsblk, lvmd_config, report};
use proptest::prelude::*;
use tonic::Code;

fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lvm2")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `base` with up to 8 bytes overwritten (positions taken modulo its length).
fn mutated(base: &[u8], edits: &[(usize, u8)]) -> String {
    let mut b = base.to_vec();
    if !b.is_empty() {
        for (at, byte) in edits {
            let i = at % b.len();
            b[i] = *byte;
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

fn edits() -> impl Strategy<Value = Vec<(usize, u8)>> {
    prop::collection::vec((any::<usize>(), any::<u8>()), 0..8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every i64 triple: a size that is whole sectors, at least what was asked and within the
    /// limit, or an error with the spec's code; never a panic or a wrapped value.
    #[test]
    fn sizing_holds_for_all_i64(required in any::<i64>(), limit in any::<i64>(), minimum in 0i64..(1 << 40)) {
        match requested_bytes(required, limit, minimum) {
            Ok(bytes) => {
                prop_assert!(bytes > 0 && bytes <= MAX_BYTES);
                prop_assert_eq!(bytes % 4096, 0);
                prop_assert!(bytes >= required.max(minimum) || required.max(minimum) == 0);
                prop_assert!(limit == 0 || bytes <= limit);
            }
            Err(e) => prop_assert!(matches!(e.code, Code::InvalidArgument | Code::OutOfRange), "{e}"),
        }
    }

    /// Any name: accepted only as a DNS-1123 subdomain (lowercased), else INVALID_ARGUMENT.
    #[test]
    fn object_names_are_subdomains_or_refused(name in ".{0,300}") {
        match object_name("name", &name) {
            Ok(n) => {
                prop_assert_eq!(&n, &name.to_lowercase());
                prop_assert!(!n.is_empty() && n.len() <= MAX_LEN);
                prop_assert!(n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'));
                prop_assert!(!n.starts_with(['-', '.']) && !n.ends_with(['-', '.']));
            }
            Err(e) => {
                prop_assert_eq!(e.code, Code::InvalidArgument);
                prop_assert!(e.message.starts_with("name"));
            }
        }
    }

    /// Any path: accepted only as a plain absolute path that is not the root.
    #[test]
    fn host_paths_are_plain_and_absolute(path in "(/|\\.|\\.\\.|-|[a-z]{1,3}|\u{0}){0,12}") {
        if let Ok(p) = host_path(&path, "target_path") {
            prop_assert!(p.starts_with('/'));
            prop_assert!(!p.contains('\0'));
            prop_assert!(p.split('/').all(|part| part != "." && part != ".."));
            prop_assert!(!p.trim_end_matches('/').is_empty());
        }
    }

    #[test]
    fn grpc_timeouts_never_panic(v in ".{0,24}") {
        let _ = parse_grpc_timeout(&v);
    }

    /// lvm2's reports, lsblk's and losetup's JSON, blkid's export, the mount table and
    /// lvmd.yaml, each damaged at random: parsed or refused, never a panic.
    #[test]
    fn host_output_parsers_never_panic(e in edits()) {
        for f in ["lvs_linear.json", "lvs_raid1.json", "lvs_thin.json", "lvs_empty.json"] {
            let _ = report::parse_lvs(&mutated(&fixture(f), &e));
        }
        let _ = report::parse_pvs(&mutated(&fixture("pvs.json"), &e));
        for f in ["vgs_tagged.json", "vgs_with_free.json"] {
            let _ = report::parse_vgs(&mutated(&fixture(f), &e));
        }
        for f in ["lsblk_loops.json", "lsblk_mountpoints.json", "lsblk_partitions.json"] {
            let _ = lsblk::parse_lsblk(&mutated(&fixture(f), &e));
        }
        let _ = lsblk::parse_losetup_back_files(&mutated(&fixture("losetup_back_file.json"), &e));
        for f in ["blkid_dos_pttype.txt", "blkid_ext4.txt", "blkid_lvm2_member.txt"] {
            let _ = lsblk::parse_blkid_export(&mutated(&fixture(f), &e));
        }
        let table = b"35 22 254:3 / /var/lib/kubelet/pods/p1/volumes/kubernetes.io~csi/pvc-1/mount rw,relatime - xfs /dev/mapper/vg1-abc rw,attr2,nouuid\n";
        let _ = mountinfo::parse(&mutated(table, &e));
        let lvmd = b"socket-name: /run/lvmd/lvmd.socket\ndevice-classes:\n  - name: vg1\n    volume-group: vg1\n    default: true\n    spare-gb: 0\n    thin-pool:\n      name: tp\n      overprovision-ratio: 10\n";
        let _ = lvmd_config::parse(&mutated(lvmd, &e));
    }

    /// Arbitrary text for every parser, not only damaged real output.
    #[test]
    fn parsers_take_any_text(text in ".{0,200}") {
        let _ = report::parse_lvs(&text);
        let _ = report::parse_pvs(&text);
        let _ = report::parse_vgs(&text);
        let _ = lsblk::parse_lsblk(&text);
        let _ = mountinfo::parse(&text);
        let _ = lvmd_config::parse(&text);
    }

    /// Whatever a Node says (its Ready condition, taints, deletion, the written-off record,
    /// damaged or not), the dead-node decision answers and never writes off a node whose
    /// kubelet reports Ready, nor one that is neither deleted (with TopoLVM's finalizer) nor
    /// out of service.
    #[test]
    fn a_node_is_written_off_only_when_gone_and_not_ready(
        status in prop::option::of(prop::sample::select(vec!["True", "False", "Unknown", "", "true"])),
        since_s in -100_000i64..100_000,
        deleting in any::<bool>(),
        finalizer in any::<bool>(),
        tainted in any::<bool>(),
        record in prop::option::of(".{0,80}"),
        grace_s in 0u64..10_000,
    ) {
        use lvms::operator::volumes::dead_node::{Verdict, verdict, OUT_OF_SERVICE_TAINT, WRITTEN_OFF_ANNOTATION};
        let now: k8s_openapi::jiff::Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let since = now - k8s_openapi::jiff::SignedDuration::from_secs(since_s);
        let mut v = serde_json::json!({"metadata": {"name": "w1"}});
        if finalizer {
            v["metadata"]["finalizers"] = serde_json::json!(["topolvm.io/node"]);
        }
        if deleting {
            v["metadata"]["deletionTimestamp"] = serde_json::json!(now.to_string());
        }
        if tainted {
            v["spec"] = serde_json::json!({"taints": [{"key": OUT_OF_SERVICE_TAINT, "effect": "NoExecute"}]});
        }
        if let Some(st) = status {
            v["status"] = serde_json::json!({"conditions": [
                {"type": "Ready", "status": st, "lastTransitionTime": since.to_string()}]});
        }
        if let Some(r) = &record {
            v["metadata"]["annotations"] = serde_json::json!({WRITTEN_OFF_ANNOTATION: r});
        }
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(v).unwrap();
        let got = verdict(&node, now, std::time::Duration::from_secs(grace_s));
        if let Verdict::WriteOff(_) = got {
            prop_assert!(status != Some("True"), "a Ready node written off");
            prop_assert!((deleting && finalizer) || tainted, "a node neither deleted nor out of service");
            prop_assert!(
                status.is_none() || grace_s == 0 || since_s >= grace_s as i64,
                "written off within the grace"
            );
        }
        if let Verdict::Wait { after, .. } = got {
            prop_assert!(after.as_secs() <= grace_s);
        }
    }
}
