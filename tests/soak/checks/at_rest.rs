//! Checks 2 and 3: nothing left on the host or in the API, journals verify with no open
//! intents; then 4-6.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use lvms::api::{LVMCluster, LVMVolumeGroup, LVMVolumeGroupNodeStatus};
use lvms_journal::Record;
use lvms_testkit::disks::{pvs, vg_names};
use serde_json::Value;

use crate::NODES;
use crate::cycle::{Cycle, Soak};
use crate::journals::{journal_dir, lvms_cli, read_journal};
use crate::report::clip;
use crate::seen::record_seen;
use crate::who::Who;

impl Soak<'_> {
    /// Checks 2-7 for cycle `c`; returns true when something was left behind.
    pub(crate) async fn check_at_rest(&mut self, c: &Cycle) -> bool {
        let k = c.k;
        let mut left = false;

        // 2. Nothing left on the host.
        let vgs = vg_names();
        for vg in [&c.vga, &c.vgb] {
            if vgs.contains(vg) {
                left = true;
                self.report.add(
                    k,
                    "left-vg",
                    vg,
                    format!("volume group {vg} still in vgs after delete"),
                );
            }
        }
        let labels = pvs();
        for d in self.disks {
            if let Some((_, vg)) = labels.iter().find(|(pv, _)| *pv == d.loop_dev) {
                left = true;
                self.report.add(
                    k,
                    "left-pv-label",
                    &format!("{k}/{}", d.loop_dev),
                    format!(
                        "{} ({}) still carries an LVM label after delete (vg {:?})",
                        d.loop_dev, d.link, vg
                    ),
                );
            }
        }
        for node in NODES {
            if let Ok(text) = std::fs::read_to_string(self.s.lvmd_path(node)) {
                left = true;
                let vg = c.vg_of(node);
                let what = if text.contains(vg) {
                    format!("still has an entry for {vg}")
                } else {
                    "kept after its last class was removed".to_string()
                };
                self.report.add(
                    k,
                    "left-lvmd-config",
                    &format!("{k}/{node}"),
                    format!("{node}'s lvmd.yaml {what}: {}", clip(&text, 300)),
                );
            }
        }

        // 2. No owned objects left; a node status created outside a live cluster.
        let ns = &self.s.ns.name;
        let client = &self.s.client;
        let lp = ListParams::default();
        let mut objects: Vec<(String, String)> = Vec::new();
        for o in Api::<LVMVolumeGroup>::namespaced(client.clone(), ns)
            .list_metadata(&lp)
            .await
            .expect("listing LVMVolumeGroups")
            .items
        {
            objects.push((
                format!("LVMVolumeGroup/{}", o.name_any()),
                o.uid().unwrap_or_default(),
            ));
        }
        let statuses = Api::<LVMVolumeGroupNodeStatus>::namespaced(client.clone(), ns)
            .list_metadata(&lp)
            .await
            .expect("listing LVMVolumeGroupNodeStatuses")
            .items;
        for o in &statuses {
            record_seen(&self.seen, "LVMVolumeGroupNodeStatus", &o.metadata);
        }
        for o in Api::<StorageClass>::all(client.clone())
            .list_metadata(&lp)
            .await
            .expect("listing StorageClasses")
            .items
            .into_iter()
            .filter(|o| o.name_any().starts_with("lvms-"))
        {
            objects.push((
                format!("StorageClass/{}", o.name_any()),
                o.uid().unwrap_or_default(),
            ));
        }
        if let Some(o) = Api::<DaemonSet>::namespaced(client.clone(), ns)
            .get_metadata_opt("vg-manager")
            .await
            .expect("getting the DaemonSet")
        {
            objects.push(("DaemonSet/vg-manager".into(), o.uid().unwrap_or_default()));
        }
        if let Some(o) = Api::<CSIDriver>::all(client.clone())
            .get_metadata_opt("topolvm.io")
            .await
            .expect("getting the CSIDriver")
        {
            objects.push(("CSIDriver/topolvm.io".into(), o.uid().unwrap_or_default()));
        }
        for o in Api::<LVMCluster>::namespaced(client.clone(), ns)
            .list_metadata(&lp)
            .await
            .expect("listing LVMClusters")
            .items
        {
            objects.push((
                format!("LVMCluster/{}", o.name_any()),
                o.uid().unwrap_or_default(),
            ));
        }
        if !objects.is_empty() {
            left = true;
        }
        for (what, uid) in &objects {
            self.report.add(
                k,
                "left-object",
                uid,
                format!("{what} (uid {uid}) still exists after the cluster was deleted"),
            );
        }
        let present: BTreeSet<String> = statuses.iter().filter_map(|o| o.uid()).collect();
        if !present.is_empty() {
            left = true;
        }
        let seen = self.seen.lock().map(|m| m.clone()).unwrap_or_default();
        for (uid, o) in seen
            .iter()
            .filter(|(_, o)| o.kind == "LVMVolumeGroupNodeStatus")
        {
            let outside = !self.timeline.cluster_live_at(o.first_ms);
            let still = present.contains(uid);
            if outside {
                self.report.add(
                    self.timeline.cycle_of(o.first_ms),
                    "node-status-recreated",
                    uid,
                    format!(
                        "LVMVolumeGroupNodeStatus/{} (uid {uid}) created at {} while no live LVMCluster existed (after teardown began, or between cycles){}",
                        o.name,
                        self.timeline.offset(o.first_ms),
                        if still { "; still present at rest" } else { "" }
                    ),
                );
            } else if still {
                self.report.add(
                    k,
                    "left-object",
                    uid,
                    format!(
                        "LVMVolumeGroupNodeStatus/{} (uid {uid}) still exists after the cluster was deleted",
                        o.name
                    ),
                );
            }
        }

        // 3. Journals verify and hold no open intents.
        for who in Who::ALL {
            let dir = journal_dir(self.s, who);
            let out = lvms_cli(&["journal", "verify"], &dir);
            if !out.status.success() {
                self.report.add(
                    k,
                    "journal-verify",
                    &format!("{k}/{who}"),
                    format!(
                        "lvms journal verify {} exited {:?}: {}{}",
                        dir.display(),
                        out.status.code(),
                        clip(&String::from_utf8_lossy(&out.stdout), 400),
                        clip(&String::from_utf8_lossy(&out.stderr), 400)
                    ),
                );
            }
            let out = lvms_cli(&["journal", "inspect", "--open", "-o", "json"], &dir);
            let open: Option<Vec<Value>> = serde_json::from_slice(&out.stdout).ok();
            match open.filter(|_| out.status.success()) {
                Some(v) => {
                    // Each open intent once, in the cycle it was first seen open at rest.
                    for e in &v {
                        let o = &e["object"];
                        self.report.add(
                            self.timeline.cycle_of(e["at_ms"].as_u64().unwrap_or(0)),
                            "open-intents",
                            &format!("{who}/{}", e["seq"]),
                            format!(
                                "{who} journal: intent seq {} (unit {}, action {}, object {}/{}) still open at rest after cycle {k}",
                                e["seq"],
                                e["unit"].as_str().unwrap_or("?"),
                                e["body"]["action"].as_str().unwrap_or("?"),
                                o["kind"].as_str().unwrap_or("?"),
                                o["name"].as_str().unwrap_or("?")
                            ),
                        );
                    }
                }
                None => self.report.add(
                    k,
                    "journal-verify",
                    &format!("{k}/{who}/cli"),
                    format!(
                        "lvms journal inspect --open {} failed ({:?}): {}",
                        dir.display(),
                        out.status.code(),
                        clip(&String::from_utf8_lossy(&out.stderr), 400)
                    ),
                ),
            }
        }

        let mut journals: Vec<(Who, Vec<Record>)> = Vec::new();
        for who in Who::ALL {
            match read_journal(self.s, who) {
                Ok(r) => journals.push((who, r)),
                Err(e) => self.report.add(
                    k,
                    "journal-verify",
                    &format!("{k}/{who}/read"),
                    format!("{who} journal unreadable: {e}"),
                ),
            }
        }

        // 4. One vgcreate effect per VG, and 7. every host command once, none failing in a
        // cycle without kills (the names are reused: only this cycle's records count).
        let since = self.timeline.start_ms(k);
        let killed = self.chaos.cycle_random + self.chaos.cycle_fault > 0;
        for (who, recs) in &journals {
            let Some(node) = who.node() else { continue };
            let vg = c.vg_of(node);
            let cycle: Vec<Record> = recs.iter().filter(|r| r.at_ms >= since).cloned().collect();
            self.check_vgcreate(k, node, vg, &cycle);
            self.check_host_commands(k, node, recs, since..u64::MAX, killed);
        }

        // 5 and 6. Events.
        self.check_events(&journals).await;
        left
    }
}
