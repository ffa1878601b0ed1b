//! What one pass of a volume group sees on the host: lsblk with blkid's signatures, pvs and
//! vgs, resolved device paths, loop back-files and sysfs holders; and LVMS's filters over it.
//! A read that fails is an error to retry, never "nothing there".

use std::collections::{BTreeMap, BTreeSet};

use lvms_actors::UnitError;

use super::VolumeGroupUnit;
use crate::api::LVMVolumeGroup;
use crate::node::commands;
use crate::node::lsblk::{BlockDevice, LsblkError, TYPE_LVM, flatten, parse_lsblk};
use crate::node::report::{ExistingVg, PhysicalVolume};
use crate::node::vg::allowlist;
use crate::node::vg::filter::{FilterContext, FilteredDevices, filter_devices, volume_gates};
use crate::node::vg::resolve::{ResolvedPaths, paths_to_resolve};
use crate::vgmanager::host::{HostError, HostOps};

/// The host as one reconcile sees it.
pub(super) struct Observed {
    pub(super) devices: Vec<BlockDevice>,
    pub(super) pvs: Vec<PhysicalVolume>,
    pub(super) existing: Option<ExistingVg>,
    pub(super) resolved: ResolvedPaths,
    pub(super) loop_back_files: BTreeMap<String, String>,
    pub(super) holders: BTreeMap<String, Vec<String>>,
    /// lvms's volume gates among `devices`: refused, never probed.
    pub(super) gates: BTreeSet<String>,
}

/// Whether a failed path lookup means the path is not there (a fact the planner may act on),
/// rather than a lookup that failed (permissions, I/O, a symlink loop: an error to retry).
fn is_absent(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// The names in a device's sysfs `holders` directory. Unreadable is not "no holders" (that
/// would offer a held device as free): the error stands in for the holders, so the filter
/// refuses the device with it as the reason until a later pass can read them (as an
/// unreadable blkid probe). Per device: a device gone since lsblk must not fail the pass.
fn holders_of(host: &dyn HostOps, dir: &std::path::Path) -> Vec<String> {
    host.read_dir_names(dir)
        .unwrap_or_else(|e| vec![format!("unknown holders ({}: {e})", dir.display())])
}

/// Why a loop device's back-file is not known (it is then refused as unusable).
#[derive(Debug, thiserror::Error)]
enum BackFileError {
    #[error(transparent)]
    Losetup(#[from] HostError),
    #[error(transparent)]
    Unparsable(#[from] LsblkError),
    #[error("losetup reported no back-file")]
    Missing,
}

/// The back-file in `losetup <dev> -O BACK-FILE --json` output; unparsable output or an
/// empty back-file is an error, never a back-file that passes the Kubernetes-volume check.
fn first_back_file(stdout: &str) -> Result<String, BackFileError> {
    crate::node::lsblk::parse_losetup_back_files(stdout)?
        .into_iter()
        .next()
        .filter(|f| !f.is_empty())
        .ok_or(BackFileError::Missing)
}

/// The devices whose signatures a pass reads: all but LVs (lsblk type `lvm`), which the filter
/// refuses as LVMS does and leaves out of `status.excluded` (`Rejection::LvmPartition`), and
/// lvms's own volume gates on them (`Rejection::VolumeGate`), so what they hold decides nothing
/// and a pass costs the same with one mounted volume or a hundred. Anything else stacked on an
/// LV (a user's dm-crypt, say) is still probed.
fn signatures_needed(devices: &[BlockDevice], gates: &BTreeSet<String>) -> Vec<String> {
    flatten(devices)
        .into_iter()
        .filter(|(kname, d)| d.device_type != TYPE_LVM && !gates.contains(kname))
        .map(|(kname, _)| kname)
        .collect()
}

impl VolumeGroupUnit {
    pub(super) async fn observe(&self, vg: &LVMVolumeGroup) -> Result<Observed, UnitError> {
        let lsblk = self.run_host(&commands::lsblk()).await?;
        let mut devices =
            parse_lsblk(&lsblk).map_err(|e| UnitError::retryable("LsblkFailed", e.to_string()))?;
        if let Some(allowed) = self.allowed_devices()? {
            allowlist::retain_allowed(&mut devices, &allowed);
        }
        // lsblk's FSTYPE comes from udev, which containers and CI lack: read the signatures
        // from the devices themselves (blkid exits 2 when there is none); not of LVs
        // (`signatures_needed`), or a pass's cost would grow with the node's volumes.
        let gates = volume_gates(&devices);
        let mut probed = BTreeMap::new();
        for kname in signatures_needed(&devices, &gates) {
            // Exit 2 is "no signature"; any other failure leaves the device unknown, and an
            // unknown device must not pass the filesystem filter as an empty one: it is
            // excluded, with the error as its reason, until a later pass can read it.
            let probe = match self.exec(&commands::blkid_probe(&kname), &[2]).await {
                Ok(out) => crate::node::lsblk::parse_blkid_export(&out.stdout),
                Err(e) => crate::node::lsblk::BlkidProbe {
                    fstype: Some(format!("unknown (blkid -p failed: {e})")),
                    pttype: None,
                },
            };
            probed.insert(kname, probe);
        }
        tracing::debug!(?probed, "signatures probed with blkid");
        crate::node::lsblk::apply_probes(&mut devices, &probed);
        let (pvs, existing) = self.read_pvs_and_vg().await?;
        let mut resolved = ResolvedPaths::new();
        for p in paths_to_resolve(vg.spec.device_selector.as_ref(), &pvs) {
            match self.ctx.host.canonicalize(std::path::Path::new(&p)) {
                Ok(t) => resolved.insert(p, t.to_string_lossy().into_owned()),
                // The planner reads an unresolved path as absent (an optional path that is not
                // there, a PV name to compare otherwise): only a path that is not there is.
                Err(e) if is_absent(&e) => resolved.insert_error(p, e.to_string()),
                Err(e) => {
                    return Err(UnitError::retryable(
                        "PathResolveFailed",
                        format!("resolving {p}: {e}"),
                    ));
                }
            };
        }
        let flat = flatten(&devices);
        let mut loop_back_files = BTreeMap::new();
        let mut holders = BTreeMap::new();
        for (kname, dev) in &flat {
            let short = kname.trim_start_matches("/dev/");
            // Unreadable holders are not "no holders" (see `holders_of`).
            let h = holders_of(
                self.ctx.host.as_ref(),
                std::path::Path::new(&format!("/sys/class/block/{short}/holders")),
            );
            if !h.is_empty() {
                holders.insert(kname.clone(), h);
            }
            if dev.device_type == crate::node::lsblk::TYPE_LOOP {
                // A back-file that cannot be read, or none, is left out: the filter then
                // refuses the device as an unusable loop, the safe side. Never an empty
                // back-file, which would pass the Kubernetes-volume check. Per device, as
                // blkid: a loop device detached meanwhile must not fail the whole pass.
                let back_file = match self.exec(&commands::losetup_back_file(kname), &[]).await {
                    Ok(out) => first_back_file(&out.stdout),
                    Err(e) => Err(BackFileError::from(e)),
                };
                match back_file {
                    Ok(f) => {
                        loop_back_files.insert(kname.clone(), f);
                    }
                    Err(e) => {
                        tracing::warn!(device = %kname, error = %e, "loop device back-file unreadable; refused as unusable");
                    }
                }
            }
        }
        Ok(Observed {
            devices,
            pvs,
            existing,
            resolved,
            loop_back_files,
            holders,
            gates,
        })
    }

    /// The resolved `--device-allowlist`, re-read every pass so devices can be added live.
    fn allowed_devices(&self) -> Result<Option<BTreeSet<String>>, UnitError> {
        let Some(path) = &self.ctx.device_allowlist else {
            return Ok(None);
        };
        let text = self.ctx.host.read_to_string(path).map_err(|e| {
            UnitError::retryable(
                "DeviceAllowlistUnreadable",
                format!(
                    "--device-allowlist {}: {e}; fix the file or drop the flag",
                    path.display()
                ),
            )
        })?;
        // A listed path that is not there is no device of this node: nothing to allow. One
        // that cannot be looked up is an error to retry, not a device taken off the list.
        let mut allowed = BTreeSet::new();
        for p in allowlist::parse(&text) {
            match self.ctx.host.canonicalize(std::path::Path::new(&p)) {
                Ok(k) => {
                    allowed.insert(k.to_string_lossy().into_owned());
                }
                Err(e) if is_absent(&e) => {}
                Err(e) => {
                    return Err(UnitError::retryable(
                        "DeviceAllowlistUnreadable",
                        format!("--device-allowlist {}: {p}: {e}", path.display()),
                    ));
                }
            }
        }
        Ok(Some(allowed))
    }

    /// LVMS's filters over what `observe` saw.
    pub(super) fn filter(&self, vg: &LVMVolumeGroup, obs: &Observed) -> FilteredDevices {
        let ctx = FilterContext {
            vg_name: &self.vg,
            selector: vg.spec.device_selector.as_ref(),
            resolved: &obs.resolved,
            pvs: &obs.pvs,
            loop_back_files: &obs.loop_back_files,
            holders: &obs.holders,
            gates: &obs.gates,
        };
        filter_devices(&obs.devices, &ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system temp dir (removed by the caller).
    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("lvms-vg-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir); // leftovers of an earlier run, if any
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn only_a_path_that_is_not_there_counts_as_absent() {
        let dir = scratch("absent");
        let file = dir.join("file");
        std::fs::write(&file, "").unwrap();
        let lookup = |p: std::path::PathBuf| std::fs::canonicalize(p).unwrap_err();
        assert!(is_absent(&lookup(dir.join("missing"))));
        assert!(is_absent(&lookup(file.join("below-a-file"))));
        // A symlink loop is a failed lookup, not an absent path.
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        assert!(!is_absent(&lookup(a)));
        assert!(!is_absent(&std::io::Error::from(
            std::io::ErrorKind::PermissionDenied
        )));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unreadable_holders_refuse_the_device_instead_of_freeing_it() {
        use crate::vgmanager::host::Host;
        let dir = scratch("holders");
        assert_eq!(holders_of(&Host::default(), &dir), Vec::<String>::new());
        std::fs::create_dir(dir.join("dm-3")).unwrap();
        assert_eq!(holders_of(&Host::default(), &dir), vec!["dm-3".to_string()]);
        let gone = holders_of(&Host::default(), &dir.join("missing"));
        assert_eq!(gone.len(), 1);
        assert!(gone[0].starts_with("unknown holders ("), "{gone:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_loop_back_file_that_cannot_be_read_is_an_error_not_an_empty_one() {
        assert_eq!(
            first_back_file(r#"{"loopdevices":[{"back-file":"/var/disk.img"}]}"#).ok(),
            Some("/var/disk.img".to_string())
        );
        for out in [
            r#"{"loopdevices":[]}"#,
            r#"{"loopdevices":[{"back-file":null}]}"#,
            r#"{"loopdevices":[{}]}"#,
            r#"{}"#,
            "losetup: /dev/loop9: No such device or address",
        ] {
            assert!(first_back_file(out).is_err(), "{out}");
        }
    }

    #[test]
    fn a_pass_reads_the_signatures_of_every_device_but_lvs_and_lvms_gates() {
        // A PV holding a thin pool's hidden LVs and a volume with its gate stacked on it.
        let dev = |kname: &str, ty: &str, children: &str| {
            format!(
                r#"{{"name":"{kname}","kname":"{kname}","type":"{ty}","size":"1G","ro":false,
                   "rota":false,"fstype":null,"mountpoint":null,"children":[{children}]}}"#
            )
        };
        let gate = dev("/dev/dm-4", "dm", "");
        let volume = dev("/dev/dm-3", "lvm", &gate);
        // The same, named as lvms's gates are: refused unprobed.
        let ours = dev("/dev/dm-5", "dm", "").replacen(
            "\"name\":\"/dev/dm-5\"",
            "\"name\":\"/dev/mapper/lvms-pvc-1\"",
            1,
        );
        let published = dev("/dev/dm-6", "lvm", &ours);
        let lvs = [
            dev("/dev/dm-0", "lvm", ""),
            dev("/dev/dm-1", "lvm", ""),
            volume,
            published,
        ]
        .join(",");
        let tree = format!(
            r#"{{"blockdevices":[{},{}]}}"#,
            dev("/dev/vdb", "disk", &lvs),
            dev("/dev/vdc", "disk", "")
        );
        let devices = parse_lsblk(&tree).expect("lsblk");
        let gates = volume_gates(&devices);
        assert_eq!(gates, BTreeSet::from(["/dev/dm-5".to_string()]));
        assert_eq!(
            signatures_needed(&devices, &gates),
            ["/dev/dm-4", "/dev/vdb", "/dev/vdc"]
        );
    }
}
