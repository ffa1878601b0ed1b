//! Installing the lvms CRDs on a cluster and waiting until the API server serves them.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(transparent)]
    Crd(#[from] lvms::api::crd::CrdError),
    #[error("applying CRD {name}: {source}")]
    Apply { name: String, source: kube::Error },
    #[error("CRD {name} not Established after {timeout:?}; last conditions: {conditions}")]
    NotEstablished {
        name: String,
        timeout: Duration,
        conditions: String,
    },
}

/// Server-side applies every CRD (field manager `lvms-installer`) and waits for Established.
pub async fn install_crds(client: &kube::Client, timeout: Duration) -> Result<(), InstallError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crds = lvms::api::crd::all()?;
    let pp = PatchParams::apply("lvms-installer").force();
    for crd in &crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &pp, &Patch::Apply(crd))
            .await
            .map_err(|source| InstallError::Apply { name, source })?;
    }
    let deadline = Instant::now() + timeout;
    for crd in &crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        loop {
            let conditions = api
                .get_status(&name)
                .await
                .ok()
                .and_then(|c| c.status)
                .and_then(|s| s.conditions)
                .unwrap_or_default();
            if conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
            {
                break;
            }
            if Instant::now() > deadline {
                let conditions = conditions
                    .iter()
                    .map(|c| {
                        format!(
                            "{}={} ({})",
                            c.type_,
                            c.status,
                            c.message.clone().unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                return Err(InstallError::NotEstablished {
                    name,
                    timeout,
                    conditions,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}
