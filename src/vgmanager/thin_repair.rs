//! The volume actor's repairs of what a killed lvm2 left in a thin pool
//! ([`crate::node::volume::thin_repair`] names the states): each one a journaled step on the
//! LogicalVolume it blocked, taken only on the proof those functions give.

use lvms_actors::{Steps, UnitError};
use lvms_journal::ObjectRef;
use tracing::warn;

use super::context::cmd_err;
use super::volumes::{Observed, VolumesUnit};
use crate::node::lvmd_config::LvmdDeviceClass;
use crate::node::volume::actions::VolumeAction as A;
use crate::node::volume::commands as cmd;
use crate::node::volume::thin_repair::{thin_device_missing, unclaimed_stray};

impl VolumesUnit {
    /// After `action` on the LV `uid` failed with `failure`: repairs what the failure proves
    /// and says whether it did (the caller plans again), or leaves the failure as it is.
    /// `handed_out`: the LogicalVolume has a volume id (its LV is never removed here).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn repair_thin(
        &self,
        steps: &Steps,
        object: &ObjectRef,
        class: &LvmdDeviceClass,
        observed: &mut Observed,
        action: A,
        uid: &str,
        handed_out: bool,
        failure: &UnitError,
    ) -> Result<bool, UnitError> {
        let vg = class.volume_group.as_str();
        match action {
            // An LV lvcreate left without its device: nothing has it yet, so it is made again.
            A::Lvchange if !handed_out && thin_device_missing(&failure.message) => {
                warn!(volume = %uid, %vg, "thin LV without its device in the pool (a killed lvcreate): removing it to create it again");
                let argv = cmd::lvremove_volume(vg, uid).map_err(cmd_err)?;
                self.host_step(steps, object.clone(), A::Lvremove, argv)
                    .await?;
            }
            A::Lvcreate | A::LvcreateSnapshot => {
                let Some(pool) = class.thin_pool.as_ref().map(|p| p.name.as_str()) else {
                    return Ok(false);
                };
                let lvs = match observed.get(&class.name) {
                    Some(Ok(o)) => o.lvs.clone(),
                    _ => return Ok(false),
                };
                let Some(id) = unclaimed_stray(&failure.message, &lvs) else {
                    return Ok(false);
                };
                warn!(volume = %uid, %vg, %pool, device_id = id, "thin device in the pool under no LV (a killed lvm2): deleting it so lvcreate can have its id");
                let argv = cmd::thin_delete_device(vg, pool, id).map_err(cmd_err)?;
                self.host_step(steps, object.clone(), A::DeleteThinDevice, argv)
                    .await?;
            }
            _ => return Ok(false),
        }
        self.refresh(observed, &class.name, vg).await;
        Ok(true)
    }
}
