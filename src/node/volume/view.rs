//! A LogicalVolume object as the node's planner sees it (pure): sizes parsed, TopoLVM's
//! finalizer, label and pending-deletion annotation read, and the volume id of a snapshot's
//! or clone's source looked up among this node's LogicalVolumes.

use crate::api::quantity::parse_quantity_bytes;
use crate::api::topolvm::{CREATED_BY_LABEL, GROUP_SNAPSHOT_ANNOTATION, PENDING_DELETION};
use crate::api::{LOGICAL_VOLUME_FINALIZER, LogicalVolume};

use crate::node::volume::plan::{SourceError, VolumeView};

/// The planner's view of `lv`.
pub fn view_of(lv: &LogicalVolume) -> VolumeView {
    let meta = &lv.metadata;
    let status = lv.status.clone().unwrap_or_default();
    VolumeView {
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        size: parse_quantity_bytes(&lv.spec.size.0).ok(),
        device_class: lv.spec.device_class.clone().unwrap_or_default(),
        option_class: lv.spec.lvcreate_option_class.clone().unwrap_or_default(),
        source: lv.spec.source.clone().filter(|s| !s.is_empty()),
        access_type: lv.spec.access_type.clone(),
        volume_id: status.volume_id.filter(|id| !id.is_empty()),
        current_size: status
            .current_size
            .and_then(|q| parse_quantity_bytes(&q.0).ok()),
        code: status.code.unwrap_or(0),
        finalized: meta
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == LOGICAL_VOLUME_FINALIZER),
        labelled: meta
            .labels
            .as_ref()
            .and_then(|l| l.get(CREATED_BY_LABEL.0))
            .is_some_and(|v| v == CREATED_BY_LABEL.1),
        deleting: meta.deletion_timestamp.is_some(),
        pending_deletion: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(PENDING_DELETION))
            .is_some_and(|v| v == "true"),
        group: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(GROUP_SNAPSHOT_ANNOTATION))
            .filter(|g| !g.is_empty())
            .cloned(),
    }
}

/// The volume id of the LogicalVolume named by `source` (its `spec.name`, as TopoLVM's
/// controller writes it), among `volumes`; or why there is none.
pub fn source_volume_id<'a>(
    source: &str,
    volumes: impl IntoIterator<Item = &'a LogicalVolume>,
) -> Result<String, SourceError> {
    let src = volumes
        .into_iter()
        .find(|l| l.spec.name == source || l.metadata.name.as_deref() == Some(source))
        .ok_or_else(|| SourceError::NotOnNode {
            name: source.to_string(),
        })?;
    src.status
        .as_ref()
        .and_then(|s| s.volume_id.clone())
        .filter(|id| !id.is_empty())
        .ok_or_else(|| SourceError::NoVolume {
            name: source.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{LogicalVolumeSpec, LogicalVolumeStatus};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn lv(name: &str) -> LogicalVolume {
        let mut lv = LogicalVolume::new(
            name,
            LogicalVolumeSpec {
                name: name.into(),
                node_name: "n1".into(),
                size: Quantity("1Gi".into()),
                device_class: Some("ssd".into()),
                lvcreate_option_class: None,
                source: None,
                access_type: None,
            },
        );
        lv.metadata.uid = Some(format!("uid-{name}"));
        lv
    }

    #[test]
    fn topolvm_markers_and_sizes_are_read() {
        let mut a = lv("a");
        let v = view_of(&a);
        assert_eq!(v.size, Some(1 << 30));
        assert_eq!(v.uid, "uid-a");
        assert!(!v.finalized && !v.labelled && !v.pending_deletion);
        a.metadata.finalizers = Some(vec![LOGICAL_VOLUME_FINALIZER.into()]);
        a.metadata.labels = Some([(CREATED_BY_LABEL.0.into(), CREATED_BY_LABEL.1.into())].into());
        a.metadata.annotations = Some([(PENDING_DELETION.into(), "true".into())].into());
        a.status = Some(LogicalVolumeStatus {
            volume_id: Some(String::new()),
            code: Some(8),
            message: Some("no room".into()),
            current_size: Some(Quantity("2Gi".into())),
        });
        let v = view_of(&a);
        assert!(v.finalized && v.labelled && v.pending_deletion);
        // An empty volume id is no volume id (TopoLVM writes "" before it has one).
        assert_eq!(v.volume_id, None);
        assert_eq!((v.code, v.current_size), (8, Some(2 << 30)));
        a.spec.size = Quantity("lots".into());
        assert_eq!(view_of(&a).size, None);
    }

    #[test]
    fn a_source_is_found_by_its_spec_name_and_must_have_a_volume() {
        let mut src = lv("src");
        assert!(
            source_volume_id("src", [&src])
                .unwrap_err()
                .to_string()
                .contains("no volume yet")
        );
        src.status = Some(LogicalVolumeStatus {
            volume_id: Some("uid-src".into()),
            ..Default::default()
        });
        assert_eq!(source_volume_id("src", [&src]), Ok("uid-src".into()));
        assert!(
            source_volume_id("other", [&src])
                .unwrap_err()
                .to_string()
                .contains("not on this node")
        );
    }
}
