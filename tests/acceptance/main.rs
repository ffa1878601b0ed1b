//! Acceptance tests against a real kube-apiserver + etcd + kube-controller-manager.

mod crds;
mod gc;
mod harness;
mod validation;
