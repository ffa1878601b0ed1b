//! Generates the gRPC types and services from `proto/csi.proto` (the project's own copy of the
//! CSI v1.12.0 wire definitions) and `proto/pluginregistration.proto` (kubelet's plugin
//! registration). protoc comes vendored, so a build needs no system protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: a build script is single-threaded; nothing else reads the environment meanwhile.
    unsafe { std::env::set_var("PROTOC", protoc) };
    println!("cargo:rerun-if-changed=proto/csi.proto");
    println!("cargo:rerun-if-changed=proto/pluginregistration.proto");
    tonic_prost_build::configure().compile_protos(
        &["proto/csi.proto", "proto/pluginregistration.proto"],
        &["proto"],
    )?;
    Ok(())
}
