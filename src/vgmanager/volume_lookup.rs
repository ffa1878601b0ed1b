//! Where a CSI volume's LV is on this node: `lvs` of each VG in this node's lvmd.yaml. A
//! report that cannot be read is an error, never "no such LV".

use std::collections::BTreeSet;

use super::context::NodeCtx;
use crate::node::commands;
use crate::node::report::parse_lvs;

/// A volume's LV as lvm2 reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundLv {
    pub vg: String,
    pub attr: String,
    pub size: Option<u64>,
}

impl FoundLv {
    /// The LV's device path (lvm2 makes `/dev/<vg>/<lv>` for an active LV).
    pub fn device(&self, volume_id: &str) -> String {
        format!("/dev/{}/{volume_id}", self.vg)
    }

    /// Whether the LV is active: lv_attr's fifth character is its state, `a` when active (an
    /// LV after a reboot where nothing autoactivates shows `-`: no device node, no device
    /// number, nothing to mount).
    pub fn active(&self) -> bool {
        self.attr.chars().nth(4) == Some('a')
    }
}

/// The LV named `volume_id` in one of this node's VGs.
pub async fn find(ctx: &NodeCtx, volume_id: &str) -> Result<Option<FoundLv>, String> {
    // No lvmd.yaml yet: this node has no device class, so no volume of ours.
    let Some(config) = ctx.read_lvmd().map_err(|e| e.message)? else {
        return Ok(None);
    };
    let vgs: BTreeSet<&str> = config
        .device_classes
        .iter()
        .map(|c| c.volume_group.as_str())
        .collect();
    for vg in vgs {
        let argv = commands::lvs(vg).map_err(|e| e.to_string())?;
        let out = ctx.host.run(&argv, &[]).await.map_err(|e| e.to_string())?;
        let report = parse_lvs(&out.stdout).map_err(|e| e.to_string())?;
        if let Some(lv) = report.all().find(|l| l.lv_name == volume_id) {
            return Ok(Some(FoundLv {
                vg: vg.to_string(),
                attr: lv.lv_attr.clone(),
                size: lv.lv_size,
            }));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::FoundLv;

    #[test]
    fn the_fifth_attribute_tells_an_active_lv() {
        let lv = |attr: &str| FoundLv {
            vg: "vg1".into(),
            attr: attr.into(),
            size: None,
        };
        assert!(lv("Vwi-aotz--").active());
        assert!(lv("-wi-a-----").active());
        assert!(!lv("Vwi---tz--").active());
        assert!(!lv("").active(), "no attributes: not seen active");
    }
}
