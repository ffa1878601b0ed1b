//! Leftovers removed by hand after a cycle that did not end clean.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use lvms::api::{LVMCluster, LVMVolumeGroup, LVMVolumeGroupNodeStatus};
use lvms_testkit::disks::{lvm, pvs, vg_names};
use serde_json::json;

use crate::NODES;
use crate::cycle::{Cycle, Soak};

impl Soak<'_> {
    /// After a cycle that left something behind or did not converge: remove it by hand so
    /// the next cycle starts clean (nothing here is checked).
    pub(crate) async fn force_clean(&mut self, c: &Cycle) {
        let ns = &self.s.ns.name;
        let client = &self.s.client;
        let unfinalize = json!({"metadata": {"finalizers": null}});
        let pp = PatchParams::default();
        let dp = DeleteParams::default();
        let lp = ListParams::default();
        macro_rules! strip_all {
            ($ty:ty) => {{
                let api: Api<$ty> = Api::namespaced(client.clone(), ns);
                if let Ok(l) = api.list_metadata(&lp).await {
                    for o in l.items {
                        let _ = api
                            .patch(&o.name_any(), &pp, &Patch::Merge(&unfinalize))
                            .await;
                        let _ = api.delete(&o.name_any(), &dp).await;
                    }
                }
            }};
        }
        strip_all!(LVMCluster);
        strip_all!(LVMVolumeGroup);
        strip_all!(LVMVolumeGroupNodeStatus);
        let _ = Api::<DaemonSet>::namespaced(client.clone(), ns)
            .delete("vg-manager", &dp)
            .await;
        let scs: Api<StorageClass> = Api::all(client.clone());
        if let Ok(l) = scs.list_metadata(&lp).await {
            for o in l.items.iter().filter(|o| o.name_any().starts_with("lvms-")) {
                let _ = scs.delete(&o.name_any(), &dp).await;
            }
        }
        let _ = Api::<CSIDriver>::all(client.clone())
            .delete("topolvm.io", &dp)
            .await;
        // The host: this cycle's VGs, then the disks' labels, then lvmd.yaml.
        for vg in [&c.vga, &c.vgb] {
            if vg_names().contains(vg) {
                lvm("vgremove", &["-f", vg]);
            }
        }
        let labels = pvs();
        for d in self.disks {
            if labels.iter().any(|(pv, _)| *pv == d.loop_dev) {
                lvm("pvremove", &["-ff", "-y", &d.loop_dev]);
            }
        }
        for node in NODES {
            let _ = std::fs::remove_file(self.s.lvmd_path(node));
        }
        let api = self.s.clusters();
        let vgs: Api<LVMVolumeGroup> = Api::namespaced(client.clone(), ns);
        let nss: Api<LVMVolumeGroupNodeStatus> = Api::namespaced(client.clone(), ns);
        let deadline = Instant::now() + Duration::from_secs(20);
        self.chaos
            .until(deadline, || async {
                let empty = api.list_metadata(&lp).await.ok()?.items.is_empty()
                    && vgs.list_metadata(&lp).await.ok()?.items.is_empty()
                    && nss.list_metadata(&lp).await.ok()?.items.is_empty();
                empty.then_some(())
            })
            .await;
        println!("cycle {}: leftovers removed by force", c.k);
    }
}
