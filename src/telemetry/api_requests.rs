//! Requests this process sends to the API server, counted by verb and resource as the API
//! server's own `apiserver_request_total` names them, so write amplification is visible per
//! process (`lvms_kube_api_requests_total`) and the operator benchmark can report what one
//! create, edit or delete costs.

use std::sync::LazyLock;
use std::task::{Context, Poll};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub verb: String,
    pub resource: String,
}

/// One family per process: every client of the process counts into it (the operator builds
/// one client, and tests that build several Metrics share it).
pub static API_REQUESTS: LazyLock<Family<RequestLabels, Counter>> = LazyLock::new(Family::default);

/// The API server's verb and `resource[/subresource]` for a request path and query, e.g.
/// `PATCH /apis/lvm.topolvm.io/v1alpha1/namespaces/ns/lvmclusters/x/status` → ("patch",
/// "lvmclusters/status"); a GET of a collection is a list, with `watch=true` a watch.
pub fn classify(method: &http::Method, path: &str, query: Option<&str>) -> (&'static str, String) {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    // /api/v1/... or /apis/group/version/...; anything else (/readyz, /version) is "nonresource".
    let rest: &[&str] = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => &[],
    };
    let rest = match rest {
        ["namespaces", _ns, more @ ..] if !more.is_empty() => more,
        other => other,
    };
    let (resource, named) = match rest {
        [] => {
            let verb = if method == http::Method::GET {
                "get"
            } else {
                verb(method, false, query)
            };
            return (verb, "nonresource".into());
        }
        [resource] => (resource.to_string(), false),
        [resource, _name] => (resource.to_string(), true),
        [resource, _name, sub, ..] => (format!("{resource}/{sub}"), true),
    };
    (verb(method, named, query), resource)
}

fn verb(method: &http::Method, named: bool, query: Option<&str>) -> &'static str {
    let watching = query.is_some_and(|q| q.split('&').any(|kv| kv == "watch=true"));
    match *method {
        http::Method::GET if watching => "watch",
        http::Method::GET if named => "get",
        http::Method::GET => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if named => "delete",
        http::Method::DELETE => "deletecollection",
        _ => "other",
    }
}

/// Counts each request into [`API_REQUESTS`] as it is sent (whatever its outcome).
#[derive(Clone, Copy, Debug, Default)]
pub struct CountRequests;

impl<S> tower::Layer<S> for CountRequests {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted(inner)
    }
}

#[derive(Clone, Debug)]
pub struct Counted<S>(S);

impl<S, B> tower::Service<http::Request<B>> for Counted<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> S::Future {
        let (verb, resource) = classify(req.method(), req.uri().path(), req.uri().query());
        API_REQUESTS
            .get_or_create(&RequestLabels {
                verb: verb.into(),
                resource,
            })
            .inc();
        self.0.call(req)
    }
}

/// A client for KUBECONFIG or the in-cluster config whose requests are counted.
pub async fn counted_client() -> Result<kube::Client, kube::Error> {
    let config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&CountRequests)
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn paths_are_named_as_the_api_server_names_them() {
        let cases = [
            (Method::GET, "/api/v1/nodes", None, "list", "nodes"),
            (
                Method::GET,
                "/api/v1/nodes",
                Some("watch=true&resourceVersion=5"),
                "watch",
                "nodes",
            ),
            (Method::GET, "/api/v1/nodes/n1", None, "get", "nodes"),
            (
                Method::PATCH,
                "/apis/lvm.topolvm.io/v1alpha1/namespaces/ns/lvmclusters/c/status",
                Some("fieldManager=lvms"),
                "patch",
                "lvmclusters/status",
            ),
            (
                Method::POST,
                "/apis/events.k8s.io/v1/namespaces/ns/events",
                None,
                "create",
                "events",
            ),
            (
                Method::DELETE,
                "/apis/lvm.topolvm.io/v1alpha1/namespaces/ns/lvmvolumegroupnodestatuses/n1",
                None,
                "delete",
                "lvmvolumegroupnodestatuses",
            ),
            (
                Method::DELETE,
                "/apis/storage.k8s.io/v1/storageclasses",
                Some("labelSelector=a%3Db"),
                "deletecollection",
                "storageclasses",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/ns",
                None,
                "get",
                "namespaces",
            ),
            (
                Method::GET,
                "/api/v1/namespaces",
                None,
                "list",
                "namespaces",
            ),
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l",
                None,
                "update",
                "leases",
            ),
            (Method::GET, "/readyz", None, "get", "nonresource"),
            (Method::GET, "/apis", None, "get", "nonresource"),
        ];
        for (method, path, query, verb, resource) in cases {
            let (v, r) = classify(&method, path, query);
            assert_eq!((v, r.as_str()), (verb, resource), "{method} {path}");
        }
    }
}
