//! A published filesystem's gate (pure): a device-mapper linear device `lvms-<volume id>` over
//! the volume's LV, which the filesystem is made and mounted on. Suspending the gate freezes
//! its filesystem and holds its I/O without touching the LV, so lvm2 can still snapshot the LV
//! underneath; that is how a volume group snapshot is taken at one instant on every kernel
//! (README "Volume group snapshots": suspending the LVs themselves breaks lvm2's thin pool
//! transaction, and fsfreeze + `lvcreate -s` fails on 6.1). These are the names, commands and
//! parsers; the node runs them.

/// Every gate's device-mapper name starts with this.
pub const PREFIX: &str = "lvms-";

pub fn name(volume_id: &str) -> String {
    format!("{PREFIX}{volume_id}")
}

/// The volume id a gate's name carries.
pub fn volume_of(gate: &str) -> Option<&str> {
    gate.strip_prefix(PREFIX).filter(|id| !id.is_empty())
}

pub fn path(volume_id: &str) -> String {
    format!("/dev/mapper/{}", name(volume_id))
}

/// The gate's table: all of the LV (`sectors` of 512 bytes, device `major:minor`), linear.
pub fn table(sectors: u64, device: &str) -> String {
    format!("0 {sectors} linear {device} 0")
}

fn dmsetup<const N: usize>(args: [&str; N]) -> Vec<String> {
    std::iter::once("dmsetup")
        .chain(args)
        .map(String::from)
        .collect()
}

pub fn create_argv(gate: &str, table: &str) -> Vec<String> {
    dmsetup(["create", gate, "--table", table])
}

/// The `/dev/mapper` node of a device, made when no udev makes it (idempotent).
pub fn mknodes_argv(gate: &str) -> Vec<String> {
    dmsetup(["mknodes", gate])
}

/// `--retry`: a device scan (blkid, udev) that has the gate open for a moment makes a plain
/// remove fail with EBUSY; dmsetup retries it for a few seconds instead.
pub fn remove_argv(gate: &str) -> Vec<String> {
    dmsetup(["remove", "--retry", gate])
}

pub fn reload_argv(gate: &str, table: &str) -> Vec<String> {
    dmsetup(["reload", gate, "--table", table])
}

/// `dmsetup suspend` flushes and freezes the filesystem on each device (lockfs), then holds
/// its I/O: the hold of a group snapshot.
pub fn suspend_argv(gates: &[String]) -> Vec<String> {
    let mut a = dmsetup(["suspend"]);
    a.extend(gates.iter().cloned());
    a
}

pub fn resume_argv(gates: &[String]) -> Vec<String> {
    let mut a = dmsetup(["resume"]);
    a.extend(gates.iter().cloned());
    a
}

/// Every device-mapper device with its open count and whether it is suspended.
pub fn list_argv() -> Vec<String> {
    dmsetup([
        "info",
        "-c",
        "--noheadings",
        "--separator",
        " ",
        "-o",
        "name,open,suspended",
    ])
}

pub fn table_argv(gate: &str) -> Vec<String> {
    dmsetup(["table", gate])
}

/// Whether dmsetup failed because the kernel has no device-mapper driver at all (then there
/// is no device of it either).
pub fn no_driver(stderr: &str) -> bool {
    stderr.contains("Failure to communicate with kernel device-mapper driver")
}

/// One device-mapper device as `dmsetup info -c` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DmDevice {
    pub name: String,
    pub open: u32,
    pub suspended: bool,
}

/// dmsetup output that is not what [`list_argv`] or [`table_argv`] print.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DmsetupParseError {
    #[error("dmsetup info: unexpected line {line:?}")]
    InfoLine { line: String },
    #[error("dmsetup info: open count {open:?} in {line:?}")]
    InfoOpenCount { open: String, line: String },
    #[error("dmsetup info: state {state:?} in {line:?}")]
    InfoState { state: String, line: String },
    #[error("gate table: length {sectors:?} in {line:?}")]
    TableLength { sectors: String, line: String },
    #[error("gate table is not one linear segment: {line:?}")]
    TableNotLinear { line: String },
}

/// Parses [`list_argv`]'s output. "No devices found" is an empty list; a line that does not
/// parse is an error (never a device that is not there).
pub fn parse_list(text: &str) -> Result<Vec<DmDevice>, DmsetupParseError> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line == "No devices found" {
            continue;
        }
        let f: Vec<&str> = line.split(' ').filter(|s| !s.is_empty()).collect();
        let [name, open, state] = f[..] else {
            return Err(DmsetupParseError::InfoLine {
                line: line.to_string(),
            });
        };
        let open = open.parse().map_err(|_| DmsetupParseError::InfoOpenCount {
            open: open.to_string(),
            line: line.to_string(),
        })?;
        let suspended = match state {
            "Suspended" => true,
            "Active" => false,
            other => {
                return Err(DmsetupParseError::InfoState {
                    state: other.to_string(),
                    line: line.to_string(),
                });
            }
        };
        out.push(DmDevice {
            name: name.to_string(),
            open,
            suspended,
        });
    }
    Ok(out)
}

/// Gates nothing holds: not open (no filesystem mounted on them, no scan at this instant) and
/// not suspended (a group's hold, which only its release ends). One is left when the process
/// stopped between an unmount and the gate's removal; kubelet's retried NodeUnpublishVolume
/// would remove it, but not after an uninstall. The caller still checks the mount table.
pub fn idle(devices: &[DmDevice]) -> Vec<&DmDevice> {
    devices
        .iter()
        .filter(|d| volume_of(&d.name).is_some() && d.open == 0 && !d.suspended)
        .collect()
}

/// A gate's table as `dmsetup table` prints it: its length in sectors and the device under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateTable {
    pub sectors: u64,
    pub device: String,
}

pub fn parse_table(text: &str) -> Result<GateTable, DmsetupParseError> {
    let line = text.trim();
    match line.split_whitespace().collect::<Vec<_>>()[..] {
        ["0", sectors, "linear", device, "0"] => Ok(GateTable {
            sectors: sectors
                .parse()
                .map_err(|_| DmsetupParseError::TableLength {
                    sectors: sectors.to_string(),
                    line: line.to_string(),
                })?,
            device: device.to_string(),
        }),
        _ => Err(DmsetupParseError::TableNotLinear {
            line: line.to_string(),
        }),
    }
}

/// device-mapper's name of LV `vg/lv` (each `-` doubled, joined by `-`).
pub fn lv_dm_name(vg: &str, lv: &str) -> String {
    format!("{}-{}", vg.replace('-', "--"), lv.replace('-', "--"))
}

/// What a gate needs before its filesystem is mounted or grown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateStep {
    /// None yet: create it over the LV.
    Create { table: String },
    /// The LV grew (or the gate points elsewhere): load the LV's whole extent.
    Reload { table: String },
}

/// `current`: the gate's table, None when there is no gate. `lv_sectors`/`lv_device`: the LV.
pub fn plan(current: Option<&GateTable>, lv_sectors: u64, lv_device: &str) -> Option<GateStep> {
    let table = table(lv_sectors, lv_device);
    match current {
        None => Some(GateStep::Create { table }),
        Some(t) if t.sectors == lv_sectors && t.device == lv_device => None,
        Some(_) => Some(GateStep::Reload { table }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_commands() {
        assert_eq!(name("abc"), "lvms-abc");
        assert_eq!(volume_of("lvms-abc"), Some("abc"));
        assert_eq!(volume_of("vg-lv"), None);
        assert_eq!(path("abc"), "/dev/mapper/lvms-abc");
        assert_eq!(
            create_argv("lvms-a", &table(2048, "253:4")),
            [
                "dmsetup",
                "create",
                "lvms-a",
                "--table",
                "0 2048 linear 253:4 0"
            ]
        );
        assert_eq!(
            suspend_argv(&["lvms-a".into(), "lvms-b".into()]),
            ["dmsetup", "suspend", "lvms-a", "lvms-b"]
        );
        assert_eq!(lv_dm_name("my-vg", "a-b"), "my--vg-a--b");
    }

    #[test]
    fn dmsetup_info_parses_and_refuses_what_it_does_not_know() {
        let text = "lvms-u1 1 Suspended\nvg1-pool 0 Active\n";
        assert_eq!(
            parse_list(text).unwrap(),
            [
                DmDevice {
                    name: "lvms-u1".into(),
                    open: 1,
                    suspended: true
                },
                DmDevice {
                    name: "vg1-pool".into(),
                    open: 0,
                    suspended: false
                }
            ]
        );
        assert_eq!(parse_list("No devices found\n").unwrap(), []);
        assert!(no_driver(
            "/dev/mapper/control: open failed: No such device\nFailure to communicate with kernel device-mapper driver.\n"
        ));
        assert!(!no_driver("Device does not exist."));
        assert!(parse_list("lvms-u1 x Active").is_err());
        assert!(parse_list("lvms-u1 1 Weird").is_err());
        assert!(parse_list("lvms-u1 1").is_err());
    }

    #[test]
    fn a_gate_is_made_once_and_follows_its_lv() {
        let t = parse_table("0 2048 linear 253:4 0\n").unwrap();
        assert_eq!(
            t,
            GateTable {
                sectors: 2048,
                device: "253:4".into()
            }
        );
        assert!(parse_table("0 2048 striped 2 128 253:4 0 253:5 0").is_err());
        assert_eq!(plan(Some(&t), 2048, "253:4"), None);
        assert_eq!(
            plan(Some(&t), 4096, "253:4"),
            Some(GateStep::Reload {
                table: "0 4096 linear 253:4 0".into()
            })
        );
        assert_eq!(
            plan(None, 2048, "253:4"),
            Some(GateStep::Create {
                table: "0 2048 linear 253:4 0".into()
            })
        );
    }

    #[test]
    fn only_a_gate_nothing_holds_is_idle() {
        let d = |name: &str, open, suspended| DmDevice {
            name: name.into(),
            open,
            suspended,
        };
        let devices = [
            d("lvms-idle", 0, false),
            d("lvms-mounted", 1, false),
            d("lvms-held", 0, true),
            d("lvms-", 0, false),
            d("vg1-pvc--a", 0, false),
        ];
        let idle: Vec<&str> = idle(&devices).iter().map(|d| d.name.as_str()).collect();
        assert_eq!(idle, ["lvms-idle"]);
    }
}
