//! vg-manager SIGKILLed at each fault point of a volume's create, grow and delete paths: the
//! RPC, retried as csi-provisioner / csi-resizer retry it, completes once vg-manager is back;
//! one LV per volume, no orphan, nothing done twice, no open intent.

use std::time::Duration;

use lvms::csi::proto::controller_client::ControllerClient;
use lvms_journal::{Body, Journal};
use lvms_testkit::dev::operator::OperatorProcess;
use tonic::transport::Channel;

use crate::common::{
    MIB, NODE, ThickNode, create_request, create_until_ok, delete_until_ok, expand_until_ok,
};

/// Run `op` with vg-manager set to die at `point`; once it has died, restart it clean and let
/// `op` finish.
async fn killed_at<F, Fut>(n: &mut ThickNode, point: &str, op: F)
where
    F: FnOnce(ControllerClient<Channel>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    n.restart_vg_manager(&[("LVMS_CRASH_AT", point)]);
    let task = tokio::spawn(op(n.controller().await));
    let vgm = n.vgm.as_mut().expect("vg-manager");
    let status = vgm
        .wait_exit(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("vg-manager did not reach {point}:\n{}", vgm.log_text()));
    assert!(
        OperatorProcess::killed_by_sigkill(&status),
        "vg-manager at {point} exited with {status:?}:\n{}",
        vgm.log_text()
    );
    n.restart_vg_manager(&[]);
    task.await.expect("the RPC task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vg_manager_killed_at_each_fault_point_loses_and_repeats_nothing() {
    let mut n = ThickNode::start("csi-crash", &[]).await;
    let class = n.class.clone();
    let create_points = [
        "intent-durable:volumes#add-finalizer",
        "intent-durable:volumes#lvcreate",
        "applied:volumes#lvcreate",
        "step-outcome:volumes#lvcreate",
        "applied:volumes#write-status",
    ];
    let mut ids = Vec::new();
    for (i, point) in create_points.iter().enumerate() {
        let name = format!("pvc-crash-{i}");
        let (req, id) = (
            create_request(&name, 32 * MIB, &class),
            std::sync::Arc::new(std::sync::Mutex::new(String::new())),
        );
        let out = id.clone();
        killed_at(&mut n, point, move |ctl| async move {
            *out.lock().unwrap() = create_until_ok(ctl, req).await;
        })
        .await;
        let id = id.lock().unwrap().clone();
        assert_eq!(
            n.lvs().get(&id),
            Some(&(32 * MIB)),
            "{point}: {:?}",
            n.lvs()
        );
        ids.push(id);
    }
    let grow_points = [
        "intent-durable:volumes#lvresize",
        "applied:volumes#lvresize",
    ];
    for (point, id) in grow_points.iter().zip(&ids) {
        let id = id.clone();
        killed_at(&mut n, point, move |ctl| expand_until_ok(ctl, id, 48 * MIB)).await;
    }
    for id in &ids[..2] {
        assert_eq!(n.lvs().get(id), Some(&(48 * MIB)));
    }
    let delete_points = [
        "intent-durable:volumes#lvremove",
        "applied:volumes#lvremove",
        "intent-durable:volumes#remove-finalizer",
    ];
    for (point, id) in delete_points.iter().zip(&ids) {
        let id = id.clone();
        killed_at(&mut n, point, move |ctl| delete_until_ok(ctl, id)).await;
    }
    // Exactly the volumes not deleted are on disk: no orphan, no duplicate.
    let mut left: Vec<String> = n.lvs().into_keys().collect();
    left.sort();
    let mut want: Vec<String> = ids[3..].to_vec();
    want.sort();
    assert_eq!(left, want);
    let lvs = n.logical_volumes().list(&Default::default()).await.unwrap();
    assert_eq!(
        lvs.items.len(),
        want.len(),
        "one LogicalVolume per live volume"
    );

    created_once(&n, &ids).await;
}

/// The journal: every host step of every volume in `ids` took effect at most once, its
/// lvcreate exactly once, and no intent is open.
async fn created_once(n: &ThickNode, ids: &[String]) {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let j = Journal::open_copy(n.s.vg_manager_journal(NODE)).expect("journal");
    assert!(j.open_intents().expect("open intents").is_empty());
    let recs: Vec<_> = j.iter().map(|r| r.expect("a readable record")).collect();
    for id in ids {
        let mine: Vec<_> = recs
            .iter()
            .filter(|r| match &r.body {
                Body::Intent(i) => i.object.uid == *id,
                _ => true,
            })
            .cloned()
            .collect();
        let effects = lvms_testkit::journal::effects(&mine, "volumes");
        for action in ["lvcreate", "lvresize", "lvremove"] {
            if let Some(e) = effects.get(action) {
                assert!(e.took <= 1, "{id} {action}: {:?}", e.verdicts);
            }
        }
        assert_eq!(
            effects["lvcreate"].took, 1,
            "{id}: {:?}",
            effects["lvcreate"].verdicts
        );
    }
}

/// vg-manager SIGKILLed in the middle of a storm of creates, where a pass runs its lvcreates
/// back to back and reads the VG once after them: killed after the 4th lvcreate took effect
/// (others done, their statuses not yet written), after the 6th's outcome, and between two
/// status writes. Every volume ends with one LV of its size and one LogicalVolume, no lvcreate
/// ran twice, no intent is left open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vg_manager_killed_mid_batch_creates_each_volume_once() {
    // 30 volumes of 32 MiB.
    let mut n = ThickNode::start_with("csi-batch-crash", &[], 1536, serde_json::json!({})).await;
    let class = n.class.clone();
    let points = [
        "applied:volumes#lvcreate@4",
        "step-outcome:volumes#lvcreate@6",
        "intent-durable:volumes#write-status@3",
    ];
    let mut ids = Vec::new();
    for (round, point) in points.iter().enumerate() {
        // vg-manager away while the controller writes the storm's LogicalVolumes: its first
        // pass back has all ten to make, and dies in the middle of them.
        n.stop_vg_manager();
        let ctl = n.controller().await;
        let tasks: Vec<_> = (0..10)
            .map(|i| {
                let req = create_request(&format!("pvc-batch-{round}-{i}"), 32 * MIB, &class);
                tokio::spawn(create_until_ok(ctl.clone(), req))
            })
            .collect();
        let want = 10 * (round + 1);
        let lvs = n.logical_volumes();
        lvms_testkit::eventually(Duration::from_secs(60), || async {
            let items = lvs.list(&Default::default()).await.ok()?.items;
            (items.len() >= want).then_some(())
        })
        .await
        .unwrap_or_else(|| panic!("{point}: the controller did not write {want} LogicalVolumes"));
        n.restart_vg_manager(&[("LVMS_CRASH_AT", point)]);
        let vgm = n.vgm.as_mut().expect("vg-manager");
        let status = vgm
            .wait_exit(Duration::from_secs(60))
            .unwrap_or_else(|| panic!("vg-manager did not reach {point}:\n{}", vgm.log_text()));
        assert!(
            OperatorProcess::killed_by_sigkill(&status),
            "vg-manager at {point} exited with {status:?}:\n{}",
            vgm.log_text()
        );
        n.restart_vg_manager(&[]);
        for t in tasks {
            ids.push(t.await.expect("a create task"));
        }
    }
    let mut on_disk: Vec<String> = n.lvs().into_keys().collect();
    on_disk.sort();
    let mut want = ids.clone();
    want.sort();
    want.dedup();
    assert_eq!(want.len(), ids.len(), "one volume per request: {ids:?}");
    assert_eq!(on_disk, want, "no orphan, no duplicate LV");
    assert!(n.lvs().values().all(|s| *s == 32 * MIB), "{:?}", n.lvs());
    let objects = n.logical_volumes().list(&Default::default()).await.unwrap();
    assert_eq!(
        objects.items.len(),
        ids.len(),
        "one LogicalVolume per volume"
    );
    created_once(&n, &ids).await;
    // The storms were made in batches: some pass ran several lvcreates before its first status.
    let j = Journal::open_copy(n.s.vg_manager_journal(NODE)).expect("journal");
    let (mut run, mut longest) = (0, 0);
    for r in j.iter() {
        let r = r.expect("a readable record");
        let Body::Intent(i) = &r.body else { continue };
        match (i.unit.as_str(), i.action.as_str()) {
            ("volumes", "lvcreate") => {
                run += 1;
                longest = usize::max(longest, run);
            }
            ("volumes", "write-status") => run = 0,
            _ => {}
        }
    }
    assert!(longest >= 3, "lvcreates back to back: at most {longest}");
}

/// The operator SIGKILLed at each fault point of the controller's LogicalVolume writes
/// (create, grow, delete): the RPC retried after the restart completes; one LogicalVolume and
/// one LV per volume, nothing left open in the operator's journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_killed_at_each_controller_fault_point_loses_and_repeats_nothing() {
    let mut n = ThickNode::start("csi-op-crash", &[]).await;
    let class = n.class.clone();
    // One socket path across the operator's lives, as in its Deployment.
    let socket = std::env::temp_dir().join(format!("lvms-csi-op-{}.sock", std::process::id()));
    let socket_arg = socket.display().to_string();
    let restart = |n: &mut ThickNode, env: &[(&str, &str)]| {
        n.op.kill();
        n.op = n.s.operator(env, &["--csi-socket", &socket_arg]);
    };
    let points = [
        "intent-durable:csi-controller#create-logical-volume",
        "applied:csi-controller#create-logical-volume",
        "intent-durable:csi-controller#resize-logical-volume",
        "applied:csi-controller#resize-logical-volume",
        "intent-durable:csi-controller#delete-logical-volume",
        "applied:csi-controller#delete-logical-volume",
    ];
    let mut ids: Vec<String> = Vec::new();
    for (i, point) in points.iter().enumerate() {
        restart(&mut n, &[("LVMS_CRASH_AT", point)]);
        let ctl = n.controller().await;
        let id_out = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let task = {
            let (ctl, ids, class, out) = (ctl.clone(), ids.clone(), class.clone(), id_out.clone());
            let point = point.to_string();
            tokio::spawn(async move {
                if point.contains("create") {
                    let req = create_request(&format!("pvc-op-{i}"), 32 * MIB, &class);
                    *out.lock().unwrap() = create_until_ok(ctl, req).await;
                } else if point.contains("resize") {
                    expand_until_ok(ctl, ids[i - 2].clone(), 48 * MIB).await;
                } else {
                    delete_until_ok(ctl, ids[i - 4].clone()).await;
                }
            })
        };
        let status = n
            .op
            .wait_exit(Duration::from_secs(60))
            .unwrap_or_else(|| panic!("the operator did not reach {point}:\n{}", n.op.log_text()));
        assert!(
            OperatorProcess::killed_by_sigkill(&status),
            "{point}: {status:?}"
        );
        restart(&mut n, &[]);
        task.await.expect("the RPC task");
        let id = id_out.lock().unwrap().clone();
        if !id.is_empty() {
            ids.push(id);
        }
    }
    assert_eq!(ids.len(), 2);
    // Both volumes were grown and then deleted: nothing on disk, no LogicalVolume left.
    let gone = lvms_testkit::eventually(Duration::from_secs(60), || async {
        n.lvs().is_empty().then_some(())
    })
    .await;
    assert!(gone.is_some(), "LVs left: {:?}", n.lvs());
    let lvs = n.logical_volumes().list(&Default::default()).await.unwrap();
    assert!(
        lvs.items.is_empty(),
        "LogicalVolumes left: {}",
        lvs.items.len()
    );
    let j = lvms_testkit::journal::settled(&n.s.operator_journal(), Duration::from_secs(60));
    let recs: Vec<_> = j.iter().map(|r| r.expect("a readable record")).collect();
    let effects = lvms_testkit::journal::effects(&recs, "csi-controller");
    assert!(
        effects["create-logical-volume"].took <= 2,
        "one create per volume: {:?}",
        effects["create-logical-volume"].verdicts
    );
    // The node journal: one lvcreate and one lvremove per volume.
    let nj = lvms_testkit::journal::settled(&n.s.vg_manager_journal(NODE), Duration::from_secs(60));
    let nrecs: Vec<_> = nj.iter().map(|r| r.expect("a readable record")).collect();
    let node_effects = lvms_testkit::journal::effects(&nrecs, "volumes");
    assert_eq!(
        node_effects["lvcreate"].took, 2,
        "{:?}",
        node_effects["lvcreate"].verdicts
    );
    assert_eq!(
        node_effects["lvremove"].took, 2,
        "{:?}",
        node_effects["lvremove"].verdicts
    );
}
