//! The node service's view of a volume's LV: `lvs` of each VG in this node's lvmd.yaml. A
//! report that cannot be read is an error, never "no such LV".

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::volume_group::NodeCtx;
use crate::csi::node::VolumeLookup;
use crate::node::commands;
use crate::node::report::parse_lvs;

pub struct HostVolumes {
    pub ctx: Arc<NodeCtx>,
}

impl VolumeLookup for HostVolumes {
    fn lv_attr<'a>(&'a self, volume_id: &'a str) -> BoxFuture<'a, Result<Option<String>, String>> {
        Box::pin(async move {
            // No lvmd.yaml yet: this node has no device class, so no volume of ours.
            let Some(config) = self.ctx.read_lvmd().map_err(|e| e.message)? else {
                return Ok(None);
            };
            let vgs: BTreeSet<&str> = config
                .device_classes
                .iter()
                .map(|c| c.volume_group.as_str())
                .collect();
            for vg in vgs {
                let argv = commands::lvs(vg).map_err(|e| e.to_string())?;
                let out = self
                    .ctx
                    .host
                    .run(&argv, &[])
                    .await
                    .map_err(|e| e.to_string())?;
                let report = parse_lvs(&out.stdout).map_err(|e| e.to_string())?;
                if let Some(lv) = report.all().find(|l| l.lv_name == volume_id) {
                    return Ok(Some(lv.lv_attr.clone()));
                }
            }
            Ok(None)
        })
    }
}
