//! One cycle: create → Ready, edit, delete → gone, then the checks at rest.

use std::time::{Duration, Instant};

use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use lvms::api::LVMStateType;
use lvms_testkit::Scenario;
use lvms_testkit::disks::Disk;
use lvms_testkit::fixtures::{host_selector, lvm_cluster};
use lvms_testkit::kubelet::register_csi_node;
use serde_json::{Value, json};

use crate::NODES;
use crate::chaos::Chaos;
use crate::plan::{CyclePlan, Phase};
use crate::report::{Report, clip};
use crate::seen::{SeenMap, record_seen};
use crate::timeline::{Timeline, now_ms};
use crate::who::Who;

/// A cycle that has not converged (Ready, edited, gone) within this is a violation.
const CYCLE_TIMEOUT: Duration = Duration::from_secs(90);

pub(crate) struct Cycle {
    pub(crate) k: usize,
    pub(crate) name: String,
    pub(crate) vga: String,
    pub(crate) vgb: String,
}

impl Cycle {
    fn classes(&self, a: &Disk, b: &Disk, labels: &Value) -> Value {
        json!([
            {"name": self.vga, "default": true, "nodeSelector": host_selector("node-a"),
             "deviceSelector": {"paths": [a.link]},
             "storageClassOptions": {"additionalLabels": labels}},
            {"name": self.vgb, "nodeSelector": host_selector("node-b"),
             "deviceSelector": {"paths": [b.link]},
             "storageClassOptions": {"additionalLabels": labels}}
        ])
    }

    pub(crate) fn vg_of(&self, node: &str) -> &str {
        if node == "node-a" {
            &self.vga
        } else {
            &self.vgb
        }
    }
}

pub(crate) struct Soak<'a> {
    pub(crate) s: &'a Scenario,
    pub(crate) disks: [&'a Disk; 2],
    pub(crate) chaos: Chaos<'a>,
    pub(crate) seen: SeenMap,
    pub(crate) timeline: Timeline,
    pub(crate) report: Report,
    pub(crate) not_converged_in_a_row: u32,
    /// Names every cycle reuses (a user applying the same manifest again): the LVMCluster's,
    /// and its two device classes' (so each volume group's unit is stopped and started again
    /// by name across cycles).
    pub(crate) names: [String; 3],
}

impl Soak<'_> {
    /// Runs cycle `k`; returns false when the soak should stop. With `rest`, the cycle ends at
    /// rest with its checks; without, the next cycle's create follows the delete at once (the
    /// churn), and the checks run once the run is over.
    pub(crate) async fn run_cycle(&mut self, k: usize, plan: &CyclePlan, rest: bool) -> bool {
        let [name, vga, vgb] = self.names.clone();
        let c = Cycle { k, name, vga, vgb };
        let cycle_started = Instant::now();
        let tk = self.timeline.begin();
        assert_eq!(tk, k, "cycle numbering");
        self.chaos.begin_cycle();
        self.chaos.begin_phase("arm");
        for n in NODES {
            register_csi_node(&self.s.client, n, true).await;
        }
        if let Some(f) = plan.fault_in(Phase::Create) {
            self.chaos.arm(f.who, &f.spec).await;
        }

        // Create → Ready.
        let mut deadline = Instant::now() + CYCLE_TIMEOUT;
        let labels = json!({"soak-cycle": k.to_string()});
        let body = lvm_cluster(&c.name, c.classes(self.disks[0], self.disks[1], &labels));
        self.timeline.live[k].0 = Some(now_ms());
        let created = self.s.create_cluster(body).await;
        record_seen(&self.seen, "LVMCluster", &created.metadata);
        self.chaos.begin_phase("create");
        self.chaos.schedule(plan, Phase::Create);
        let ready_in = Instant::now();
        let reached_ready = self
            .until_state(deadline, &c.name, Some(LVMStateType::Ready))
            .await;
        let ready_took = ready_in.elapsed();
        if !reached_ready {
            let last = self
                .s
                .clusters()
                .get_opt(&c.name)
                .await
                .ok()
                .flatten()
                .and_then(|c| c.status);
            self.report.add(
                k,
                "not-converged",
                &format!("{k}/ready"),
                format!(
                    "{} never reached Ready within {}s; last status: {}",
                    c.name,
                    CYCLE_TIMEOUT.as_secs(),
                    clip(&format!("{last:?}"), 900)
                ),
            );
        }

        // Edit: the StorageClasses follow a label change.
        let mut edit_took = Duration::ZERO;
        if reached_ready {
            if let Some(f) = plan.fault_in(Phase::Edit) {
                let t = Instant::now();
                self.chaos.arm(f.who, &f.spec).await;
                deadline += t.elapsed();
            }
            self.chaos.begin_phase("edit");
            self.chaos.schedule(plan, Phase::Edit);
            let t = Instant::now();
            let labels = json!({"soak-cycle": k.to_string(), "soak-edit": plan.edit_value});
            let patch = json!({"spec": {"storage": {
                "deviceClasses": c.classes(self.disks[0], self.disks[1], &labels)}}});
            self.s
                .clusters()
                .patch(&c.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("editing the LVMCluster's StorageClass labels");
            let scs: Api<StorageClass> = Api::all(self.s.client.clone());
            let want = plan.edit_value.clone();
            let names = [format!("lvms-{}", c.vga), format!("lvms-{}", c.vgb)];
            let followed = self
                .chaos
                .until(deadline, || async {
                    for n in &names {
                        let sc = scs.get_opt(n).await.ok().flatten()?;
                        if sc.labels().get("soak-edit") != Some(&want) {
                            return None;
                        }
                    }
                    Some(())
                })
                .await
                .is_some();
            edit_took = t.elapsed();
            if !followed {
                let got: Vec<String> = {
                    let mut v = Vec::new();
                    for n in &names {
                        let sc = scs.get_opt(n).await.ok().flatten();
                        v.push(format!("{n}: {:?}", sc.map(|s| s.labels().clone())));
                    }
                    v
                };
                self.report.add(
                    k,
                    "not-converged",
                    &format!("{k}/edit"),
                    format!(
                        "StorageClasses did not follow the label edit soak-edit={want} within the cycle timeout: {}",
                        got.join("; ")
                    ),
                );
            }
        }

        // Delete → gone.
        if let Some(f) = plan.fault_in(Phase::Delete) {
            let t = Instant::now();
            self.chaos.arm(f.who, &f.spec).await;
            deadline += t.elapsed();
        }
        self.chaos.begin_phase("delete");
        self.timeline.live[k].1 = Some(now_ms());
        let t = Instant::now();
        self.s
            .clusters()
            .delete(&c.name, &DeleteParams::default())
            .await
            .expect("deleting the LVMCluster");
        // kubelet unregisters the driver once the DaemonSet's pods are gone (no kubelet here).
        for n in NODES {
            register_csi_node(&self.s.client, n, false).await;
        }
        self.chaos.schedule(plan, Phase::Delete);
        // Late cycles still get 30 s to tear down before they are cleaned up by force.
        let delete_deadline = deadline.max(Instant::now() + Duration::from_secs(30));
        let gone = self.until_state(delete_deadline, &c.name, None).await;
        let delete_took = t.elapsed();
        let in_time = Instant::now() <= deadline;
        if !gone {
            let left = self.s.clusters().get_opt(&c.name).await.ok().flatten();
            self.report.add(
                k,
                "not-converged",
                &format!("{k}/delete"),
                format!(
                    "{} not gone after delete; finalizers {:?}, status {}",
                    c.name,
                    left.as_ref().map(|c| c.finalizers().to_vec()),
                    clip(&format!("{:?}", left.and_then(|c| c.status)), 600)
                ),
            );
        } else if !in_time && reached_ready {
            self.report.add(
                k,
                "not-converged",
                &format!("{k}/slow"),
                format!(
                    "converged, but after the {}s cycle timeout",
                    CYCLE_TIMEOUT.as_secs()
                ),
            );
        }
        let converged = reached_ready && gone;
        if !rest {
            println!(
                "cycle {k}: {} in {:.1}s (ready {:.1}s, edit {:.1}s, delete {:.1}s); no rest",
                if converged {
                    "converged"
                } else {
                    "NOT converged"
                },
                cycle_started.elapsed().as_secs_f64(),
                ready_took.as_secs_f64(),
                edit_took.as_secs_f64(),
                delete_took.as_secs_f64(),
            );
            if !converged {
                self.not_converged_in_a_row += 1;
                return false;
            }
            return true;
        }

        // At rest: every process up and ready, nothing scheduled.
        self.chaos.begin_phase("rest");
        if !self.chaos.quiesce().await {
            let who: Vec<String> = Who::ALL
                .iter()
                .filter(|w| !self.chaos.ready(**w))
                .map(|w| w.to_string())
                .collect();
            self.report.add(
                k,
                "not-converged",
                &format!("{k}/rest"),
                format!("processes not ready at rest: {}", who.join(", ")),
            );
        }
        for u in std::mem::take(&mut self.chaos.unexpected) {
            self.report.add(k, "unexpected-exit", &u, u.clone());
        }

        let leftovers = self.check_at_rest(&c).await;
        println!(
            "cycle {k}: {} in {:.1}s (ready {:.1}s, edit {:.1}s, delete {:.1}s); kills: {} random, {} fault-point; {}",
            if converged {
                "converged"
            } else {
                "NOT converged"
            },
            cycle_started.elapsed().as_secs_f64(),
            ready_took.as_secs_f64(),
            edit_took.as_secs_f64(),
            delete_took.as_secs_f64(),
            self.chaos.cycle_random,
            self.chaos.cycle_fault,
            if self.chaos.notes.is_empty() {
                "no kills".to_string()
            } else {
                self.chaos.notes.join("; ")
            }
        );
        if leftovers || !converged {
            self.force_clean(&c).await;
        }
        if converged {
            self.not_converged_in_a_row = 0;
        } else {
            self.not_converged_in_a_row += 1;
        }
        if self.not_converged_in_a_row >= 2 {
            self.report.add(
                k,
                "not-converged",
                "stopped",
                format!("two cycles in a row did not converge: soak stopped after cycle {k}"),
            );
            return false;
        }
        true
    }

    /// Waits (killing as planned) until the cluster has `state`, or is gone when None.
    async fn until_state(
        &mut self,
        deadline: Instant,
        name: &str,
        state: Option<LVMStateType>,
    ) -> bool {
        let api = self.s.clusters();
        self.chaos
            .until(deadline, || async {
                let c = api.get_opt(name).await.ok()?;
                match (state, c) {
                    (None, None) => Some(()),
                    (Some(want), Some(c)) => {
                        (c.status.and_then(|s| s.state) == Some(want)).then_some(())
                    }
                    _ => None,
                }
            })
            .await
            .is_some()
    }
}
