//! The node's device allowlist (`--device-allowlist`): an operator-side safety belt on top of
//! the LVMCluster's selectors. When set, devices not on it are invisible to vg-manager: never
//! probed, listed, or used. Dynamic discovery claims every free disk, so shared machines (and
//! the tests) bound it this way.

use std::collections::BTreeSet;

use crate::node::lsblk::BlockDevice;

/// One device path per line; blank lines and `#` comments ignored.
pub fn parse(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// Keeps the top-level devices whose kernel name is allowed (with their children: a disk
/// and its partitions are one decision). `allowed` holds resolved paths (`/dev/loop3`).
pub fn retain_allowed(devices: &mut Vec<BlockDevice>, allowed: &BTreeSet<String>) {
    devices.retain(|d| allowed.contains(&d.kname));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(kname: &str, children: Vec<BlockDevice>) -> BlockDevice {
        BlockDevice {
            name: kname.into(),
            kname: kname.into(),
            device_type: "disk".into(),
            children,
            ..Default::default()
        }
    }

    #[test]
    fn parse_skips_blanks_and_comments() {
        assert_eq!(
            parse("# test disks\n/dev/loop3\n\n  /dev/disk/by-id/x  \n"),
            vec!["/dev/loop3", "/dev/disk/by-id/x"]
        );
        assert!(parse("").is_empty());
    }

    #[test]
    fn only_allowed_disks_remain_with_their_children() {
        let mut devs = vec![
            dev("/dev/sda", vec![dev("/dev/sda1", vec![])]),
            dev("/dev/loop3", vec![]),
            dev("/dev/loop4", vec![]),
        ];
        let allowed = BTreeSet::from(["/dev/loop3".to_string(), "/dev/sda".to_string()]);
        retain_allowed(&mut devs, &allowed);
        let left: Vec<_> = devs.iter().map(|d| d.kname.as_str()).collect();
        assert_eq!(left, vec!["/dev/sda", "/dev/loop3"]);
        assert_eq!(devs[0].children.len(), 1);
        retain_allowed(&mut devs, &BTreeSet::new());
        assert!(devs.is_empty(), "an empty allowlist allows nothing");
    }
}
