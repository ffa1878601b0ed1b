//! Which LVMCluster is reconciled. LVMS's webhook refuses a second cluster or one outside the
//! operator namespace; without a webhook, lvms reconciles exactly one (the oldest in its
//! namespace) and reports every other one as Failed, never touching what it describes.

use std::sync::Arc;

use crate::api::LVMCluster;

pub const REASON_DUPLICATE: &str = "DuplicateLVMCluster";
pub const REASON_WRONG_NAMESPACE: &str = "LVMClusterOutsideOperatorNamespace";

#[derive(Debug, Clone)]
pub struct Rejected {
    pub cluster: Arc<LVMCluster>,
    pub reason: &'static str,
    pub message: String,
}

#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub primary: Option<Arc<LVMCluster>>,
    pub rejected: Vec<Rejected>,
}

fn age_key(c: &LVMCluster) -> (Option<k8s_openapi::jiff::Timestamp>, String) {
    (
        c.metadata.creation_timestamp.as_ref().map(|t| t.0),
        c.metadata.name.clone().unwrap_or_default(),
    )
}

pub fn select(clusters: &[Arc<LVMCluster>], namespace: &str) -> Selection {
    let (mut mine, others): (Vec<_>, Vec<_>) = clusters
        .iter()
        .cloned()
        .partition(|c| c.metadata.namespace.as_deref() == Some(namespace));
    mine.sort_by_key(|c| age_key(c));
    let mut rejected: Vec<Rejected> = others
        .into_iter()
        .map(|c| Rejected {
            message: format!(
                "LVMCluster {}/{} is outside the operator namespace {namespace}; lvms only \
                 reconciles an LVMCluster in {namespace}: delete this one and create it there",
                c.metadata.namespace.as_deref().unwrap_or_default(),
                c.metadata.name.as_deref().unwrap_or_default(),
            ),
            cluster: c,
            reason: REASON_WRONG_NAMESPACE,
        })
        .collect();
    let mut mine = mine.into_iter();
    let primary = mine.next();
    let primary_name = primary
        .as_ref()
        .and_then(|p| p.metadata.name.clone())
        .unwrap_or_default();
    rejected.extend(mine.map(|c| Rejected {
        message: format!(
            "only one LVMCluster is supported and {namespace}/{primary_name} already exists; \
             delete {} and add its device classes to {primary_name}",
            c.metadata.name.as_deref().unwrap_or_default()
        ),
        cluster: c,
        reason: REASON_DUPLICATE,
    }));
    Selection { primary, rejected }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn cluster(ns: &str, name: &str, created_s: i64) -> Arc<LVMCluster> {
        let mut c = LVMCluster::new(name, Default::default());
        c.metadata.namespace = Some(ns.into());
        c.metadata.creation_timestamp = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(created_s).unwrap(),
        ));
        Arc::new(c)
    }

    #[test]
    fn oldest_in_namespace_wins_and_the_rest_are_rejected() {
        let s = select(
            &[
                cluster("lvms", "late", 20),
                cluster("other", "elsewhere", 1),
                cluster("lvms", "first", 10),
            ],
            "lvms",
        );
        assert_eq!(s.primary.unwrap().metadata.name.as_deref(), Some("first"));
        let mut reasons: Vec<_> = s
            .rejected
            .iter()
            .map(|r| (r.cluster.metadata.name.clone().unwrap(), r.reason))
            .collect();
        reasons.sort();
        assert_eq!(
            reasons,
            vec![
                ("elsewhere".to_string(), REASON_WRONG_NAMESPACE),
                ("late".to_string(), REASON_DUPLICATE)
            ]
        );
        assert!(s.rejected.iter().any(|r| r.message.contains("lvms/first")));
    }

    #[test]
    fn none_in_namespace_means_no_primary() {
        let s = select(&[cluster("other", "x", 1)], "lvms");
        assert!(s.primary.is_none());
        assert_eq!(s.rejected.len(), 1);
    }
}
