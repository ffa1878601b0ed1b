//! What a killed lvm2 leaves in a thin pool, named from the errors lvm2 gives afterwards
//! (pure). lvm2 commits its metadata and messages the kernel's pool in separate steps, so a
//! SIGKILL between them (a container killed, a command past its deadline) leaves either an LV
//! whose thin device the pool never made (activating it fails with ENODATA, for good) or a
//! device the pool holds under no LV (the next lvcreate is given its id and fails, for good).
//! lvm2 repairs neither by itself; the volume actor does, as journaled steps, only for what
//! these functions prove: an LV never handed out, a device no LV names.

use crate::node::report::LogicalVolume as LvRow;

/// Whether a failed activation says the LV's thin device is missing from its pool (the thin
/// target's ENODATA: "Couldn't open thin internal device", lvm2's "No data available").
pub fn thin_device_missing(message: &str) -> bool {
    message.contains("No data available") || message.contains("Couldn't open thin internal device")
}

/// The device id a failed thin lvcreate was given that the pool already holds (libdevmapper:
/// "Thin pool <name> (<major:minor>) already contain thin device with device_id <N>.").
pub fn colliding_thin_id(message: &str) -> Option<u64> {
    let rest = message
        .split("already contain thin device with device_id")
        .nth(1)?;
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The colliding device of `message` when no LV of the VG (`lvs`, as read after the failure)
/// names it: nothing can open it, so deleting it loses nothing. None when lvm2 reported no
/// thin ids at all (an older lvm2): unproven is not unclaimed.
pub fn unclaimed_stray(message: &str, lvs: &[LvRow]) -> Option<u64> {
    let id = colliding_thin_id(message)?;
    let thin: Vec<&LvRow> = lvs.iter().filter(|l| l.lv_attr.starts_with('V')).collect();
    if thin.iter().any(|l| l.thin_id.is_none()) {
        return None;
    }
    (!thin.iter().any(|l| l.thin_id == Some(id))).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thin(name: &str, id: Option<u64>) -> LvRow {
        LvRow {
            lv_name: name.into(),
            lv_attr: "Vwi-a-tz--".into(),
            thin_id: id,
            ..Default::default()
        }
    }

    // The lines lvm2 2.03.16 printed in the guest for both states (around them: the argv).
    const COLLISION: &str = "`lvcreate -s -k n -n s1 vgp/base1` exited 5:   device-mapper: message ioctl on  (253:2) failed: File exists\n  Failed to process message \"create_snap 2 1\".\n  Thin pool vgp-pool-tpool (253:2) already contain thin device with device_id 2.\n  Manual intervention may be required to remove device dev_id=2 in thin pool metadata.\n  Failed to suspend thin snapshot origin vgp/base1.";
    const HOLLOW: &str = "`lvchange -a y -K vg1/u` exited 5:   device-mapper: reload ioctl on  (253:12) failed: No data available";

    #[test]
    fn a_missing_device_is_told_from_other_activation_failures() {
        assert!(thin_device_missing(HOLLOW));
        assert!(thin_device_missing(
            "device-mapper: table: 253:23: thin: Couldn't open thin internal device (-ENODATA)"
        ));
        assert!(!thin_device_missing(
            "device-mapper: reload ioctl on (253:12) failed: Device or resource busy"
        ));
    }

    #[test]
    fn the_colliding_id_is_read_and_only_an_unclaimed_one_is_a_stray() {
        assert_eq!(colliding_thin_id(COLLISION), Some(2));
        assert_eq!(
            colliding_thin_id("already contain thin device with device_id x"),
            None
        );
        assert_eq!(colliding_thin_id(HOLLOW), None);
        let lvs = [thin("a", Some(1)), thin("b", Some(3))];
        assert_eq!(unclaimed_stray(COLLISION, &lvs), Some(2));
        // An LV names it: it is that volume's device, never deleted.
        let claimed = [thin("a", Some(1)), thin("snap", Some(2))];
        assert_eq!(unclaimed_stray(COLLISION, &claimed), None);
        // lvm2 did not say which ids its LVs have: nothing is proven.
        let unknown = [thin("a", Some(1)), thin("b", None)];
        assert_eq!(unclaimed_stray(COLLISION, &unknown), None);
        // A pool (or any LV not thin) has no thin id and proves nothing either way.
        let thick = LvRow {
            lv_name: "pool".into(),
            lv_attr: "twi-aotz--".into(),
            ..Default::default()
        };
        assert_eq!(
            unclaimed_stray(COLLISION, &[thick, thin("a", Some(1))]),
            Some(2)
        );
    }
}
