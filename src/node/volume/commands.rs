//! The lvm2 commands of a CSI volume, as TopoLVM's lvmd runs them (`internal/lvmd/command`),
//! plus the lvms tag on each new LV. Sizes are bytes (`<n>b`); every argv is pure and tested.

use crate::api::topolvm::LV_TAG;
use crate::node::commands::{
    CommandError, DMSETUP, LVCHANGE, LVCREATE, LVREMOVE, LVRESIZE, VGS, argv, need_lv, need_vg,
};

/// How a class stripes and what extra options lvcreate takes (lvmd.yaml).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateOptions {
    pub stripe: Option<u32>,
    pub stripe_size: String,
    pub extra: Vec<String>,
}

fn push_common(a: &mut Vec<String>, opts: &CreateOptions) {
    a.extend(["--addtag".to_string(), LV_TAG.to_string()]);
    if let Some(n) = opts.stripe.filter(|n| *n != 0) {
        a.extend(["-i".to_string(), n.to_string()]);
        if !opts.stripe_size.is_empty() {
            a.extend(["-I".to_string(), opts.stripe_size.clone()]);
        }
    }
    a.extend(opts.extra.iter().cloned());
}

/// Thick: `lvcreate -n <lv> -L <bytes>b -W y -y --addtag lvms-volume [-i N [-I S]] [opts] <vg>`.
pub fn lvcreate_thick(
    vg: &str,
    lv: &str,
    bytes: u64,
    opts: &CreateOptions,
) -> Result<Vec<String>, CommandError> {
    need_lv("lvcreate", vg, lv)?;
    let mut a = argv(
        LVCREATE,
        ["-n", lv, "-L", &format!("{bytes}b"), "-W", "y", "-y"],
    );
    push_common(&mut a, opts);
    a.push(vg.to_string());
    Ok(a)
}

/// Thin: `lvcreate -T <vg>/<pool> -n <lv> -V <bytes>b -W y -y --addtag lvms-volume [..]`.
pub fn lvcreate_thin(
    vg: &str,
    pool: &str,
    lv: &str,
    bytes: u64,
    opts: &CreateOptions,
) -> Result<Vec<String>, CommandError> {
    let pool = need_lv("lvcreate", vg, pool)?;
    need_lv("lvcreate", vg, lv)?;
    let mut a = argv(
        LVCREATE,
        [
            "-T",
            &pool,
            "-n",
            lv,
            "-V",
            &format!("{bytes}b"),
            "-W",
            "y",
            "-y",
        ],
    );
    push_common(&mut a, opts);
    Ok(a)
}

/// A thin snapshot (also a clone or restore): `lvcreate -s -k n -n <lv> <vg>/<source>`.
pub fn lvcreate_snapshot(vg: &str, source: &str, lv: &str) -> Result<Vec<String>, CommandError> {
    let src = need_lv("lvcreate", vg, source)?;
    need_lv("lvcreate", vg, lv)?;
    Ok(argv(
        LVCREATE,
        ["-s", "-k", "n", "-n", lv, &src, "--addtag", LV_TAG],
    ))
}

/// `lvresize -L <bytes>b <vg>/<lv>` (grow only; the planner never asks for less).
pub fn lvresize(vg: &str, lv: &str, bytes: u64) -> Result<Vec<String>, CommandError> {
    let target = need_lv("lvresize", vg, lv)?;
    Ok(argv(
        LVRESIZE,
        ["-L".to_string(), format!("{bytes}b"), target],
    ))
}

/// A snapshot made read-only: `lvchange -p r <vg>/<lv>`.
pub fn lvchange_read_only(vg: &str, lv: &str) -> Result<Vec<String>, CommandError> {
    let target = need_lv("lvchange", vg, lv)?;
    Ok(argv(LVCHANGE, ["-p".to_string(), "r".into(), target]))
}

/// A clone made usable: `lvchange -k n -a y <vg>/<lv>`.
pub fn lvchange_activate_clone(vg: &str, lv: &str) -> Result<Vec<String>, CommandError> {
    let target = need_lv("lvchange", vg, lv)?;
    Ok(argv(
        LVCHANGE,
        [
            "-k".to_string(),
            "n".into(),
            "-a".into(),
            "y".into(),
            target,
        ],
    ))
}

/// A thin volume activated whatever its activation-skip flag: `lvchange -a y -K <vg>/<lv>`.
pub fn lvchange_activate(vg: &str, lv: &str) -> Result<Vec<String>, CommandError> {
    let target = need_lv("lvchange", vg, lv)?;
    Ok(argv(
        LVCHANGE,
        ["-a".to_string(), "y".into(), "-K".into(), target],
    ))
}

/// A thin device the pool holds but no LV names, deleted from the pool by number:
/// `dmsetup message <vg>-<pool>-tpool 0 "delete <id>"` (lvm2 has no command for a device it
/// does not know).
pub fn thin_delete_device(vg: &str, pool: &str, id: u64) -> Result<Vec<String>, CommandError> {
    need_lv("dmsetup message", vg, pool)?;
    let tpool = format!("{}-tpool", super::gate::lv_dm_name(vg, pool));
    Ok(argv(
        DMSETUP,
        [
            "message".to_string(),
            tpool,
            "0".into(),
            format!("delete {id}"),
        ],
    ))
}

/// `lvremove -f <vg>/<lv>` (`-f`: an active volume is removed without a prompt).
pub fn lvremove_volume(vg: &str, lv: &str) -> Result<Vec<String>, CommandError> {
    let target = need_lv("lvremove", vg, lv)?;
    Ok(argv(LVREMOVE, ["-f".to_string(), target]))
}

/// `vgs -o vg_name,vg_size,vg_free,vg_tags --units b --nosuffix --reportformat json <vg>`.
pub fn vgs_free(vg: &str) -> Result<Vec<String>, CommandError> {
    need_vg("vgs", vg)?;
    Ok(argv(
        VGS,
        [
            "-o",
            "vg_name,vg_size,vg_free,vg_tags",
            "--units",
            "b",
            "--nosuffix",
            "--reportformat",
            "json",
            vg,
        ],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thick_and_thin_creates_are_topolvms_with_the_tag() {
        let opts = CreateOptions {
            stripe: Some(2),
            stripe_size: "64".into(),
            extra: vec!["--type=raid1".into()],
        };
        assert_eq!(
            lvcreate_thick("vg1", "uid-1", 1 << 30, &opts)
                .unwrap()
                .join(" "),
            "/usr/sbin/lvcreate -n uid-1 -L 1073741824b -W y -y --addtag lvms-volume -i 2 -I 64 --type=raid1 vg1"
        );
        assert_eq!(
            lvcreate_thin("vg1", "pool0", "uid-1", 4096, &CreateOptions::default())
                .unwrap()
                .join(" "),
            "/usr/sbin/lvcreate -T vg1/pool0 -n uid-1 -V 4096b -W y -y --addtag lvms-volume"
        );
        assert_eq!(
            lvcreate_snapshot("vg1", "src", "snap").unwrap().join(" "),
            "/usr/sbin/lvcreate -s -k n -n snap vg1/src --addtag lvms-volume"
        );
        assert_eq!(
            lvremove_volume("vg1", "uid-1").unwrap().join(" "),
            "/usr/sbin/lvremove -f vg1/uid-1"
        );
        assert_eq!(
            lvresize("vg1", "uid-1", 8192).unwrap().join(" "),
            "/usr/sbin/lvresize -L 8192b vg1/uid-1"
        );
        assert_eq!(
            lvchange_activate("vg1", "uid-1").unwrap().join(" "),
            "/usr/sbin/lvchange -a y -K vg1/uid-1"
        );
        // device-mapper doubles a hyphen inside a VG or LV name.
        assert_eq!(
            thin_delete_device("vg-1", "thin-pool", 7).unwrap(),
            [
                "/usr/sbin/dmsetup",
                "message",
                "vg--1-thin--pool-tpool",
                "0",
                "delete 7"
            ]
        );
        assert!(thin_delete_device("vg1", "", 7).is_err());
    }

    #[test]
    fn empty_names_are_refused() {
        assert!(lvcreate_thick("", "a", 1, &CreateOptions::default()).is_err());
        assert!(lvcreate_thin("vg", "", "a", 1, &CreateOptions::default()).is_err());
        assert!(lvremove_volume("vg", "").is_err());
    }
}
