//! Where a CSI volume's LV is on this node: `lvs` of each VG in this node's lvmd.yaml. A
//! report that cannot be read is an error, never "no such LV".

use std::collections::{BTreeMap, BTreeSet};

use super::context::NodeCtx;
use crate::node::commands;
use crate::node::report::{LvReport, parse_lvs};

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

/// The VGs of this node's device classes (none without an lvmd.yaml).
fn node_vgs(ctx: &NodeCtx) -> Result<BTreeSet<String>, String> {
    Ok(ctx
        .read_lvmd()
        .map_err(|e| e.message)?
        .map(|config| {
            config
                .device_classes
                .into_iter()
                .map(|c| c.volume_group)
                .collect()
        })
        .unwrap_or_default())
}

/// lvm2's report of one VG's LVs; one that cannot be read is an error.
async fn lv_report(ctx: &NodeCtx, vg: &str) -> Result<LvReport, String> {
    let argv = commands::lvs(vg).map_err(|e| e.to_string())?;
    let out = ctx.host.run(&argv, &[]).await.map_err(|e| e.to_string())?;
    parse_lvs(&out.stdout).map_err(|e| e.to_string())
}

/// Every LV of this node's VGs: name → lv_attr (a name in two VGs: the first VG's, as
/// [`find`] answers).
pub async fn attrs(ctx: &NodeCtx) -> Result<BTreeMap<String, String>, String> {
    let mut attrs = BTreeMap::new();
    for vg in node_vgs(ctx)? {
        for lv in lv_report(ctx, &vg).await?.all() {
            attrs
                .entry(lv.lv_name.clone())
                .or_insert_with(|| lv.lv_attr.clone());
        }
    }
    Ok(attrs)
}

/// The LV named `volume_id` in one of this node's VGs.
pub async fn find(ctx: &NodeCtx, volume_id: &str) -> Result<Option<FoundLv>, String> {
    // No lvmd.yaml yet: this node has no device class, so no volume of ours.
    for vg in node_vgs(ctx)? {
        let report = lv_report(ctx, &vg).await?;
        if let Some(lv) = report.all().find(|l| l.lv_name == volume_id) {
            return Ok(Some(FoundLv {
                vg,
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
