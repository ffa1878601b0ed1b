//! `lvms explain KIND/[NS/]NAME`: reads the object, its Events and the journals given, and
//! prints its story (`crate::explain` decides what to say). Reads only: bounded API reads (the
//! object, its owner, one Event list by field selector) and indexed journal queries.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use lvms_journal::render::Entry;
use lvms_journal::{Filter, ObjectFilter};
use serde_json::Value;

use super::sources::{JournalSources, Source, jaeger_from_otlp};
use crate::explain::kinds::{KindInfo, LVM_CLUSTER};
use crate::explain::render::render_text;
use crate::explain::{EventFact, Facts, JournalFacts, Subject, explain, related};

/// How many of the newest records of each related object a journal contributes.
const PER_OBJECT: usize = 200;

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// KIND/NAMESPACE/NAME, or KIND/NAME for a cluster-scoped kind (lvmcluster, lvmvolumegroup,
    /// lvmvolumegroupnodestatus, storageclass, pvc, pv, logicalvolume, volumesnapshot,
    /// volumegroupsnapshot).
    pub object: String,
    #[command(flatten)]
    pub journals: JournalSources,
    /// Jaeger's UI for trace links (default: beside OTEL_EXPORTER_OTLP_ENDPOINT, port 16686).
    #[arg(long, env = "LVMS_JAEGER_URL")]
    pub jaeger: Option<String>,
    #[arg(long, short, value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

fn api_resource(k: &KindInfo) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(k.group, k.version, k.kind), k.plural)
}

/// Objects of kind `k` in namespace `ns`; every namespace when `ns` is `None` or the kind is
/// cluster-scoped.
pub fn api(client: &kube::Client, k: &KindInfo, ns: Option<&str>) -> Api<DynamicObject> {
    let ar = api_resource(k);
    match ns.filter(|_| k.namespaced) {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// The object, `None` when the API server says it is not there (or its kind is not served).
/// Any other failure is an error: never explain a world that was not seen.
async fn read(
    client: &kube::Client,
    k: &KindInfo,
    ns: &str,
    name: &str,
) -> anyhow::Result<Option<Value>> {
    match api(client, k, Some(ns)).get_opt(name).await {
        Ok(o) => Ok(o.map(serde_json::to_value).transpose()?),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(anyhow::anyhow!("reading {} {ns}/{name}: {e}", k.kind)),
    }
}

fn event_fact(e: &Event) -> EventFact {
    let time = |v: Option<Value>| v.and_then(|v| v.as_str().map(str::to_string));
    let at = time(
        e.last_timestamp
            .as_ref()
            .and_then(|t| serde_json::to_value(t).ok()),
    )
    .or_else(|| {
        time(
            e.event_time
                .as_ref()
                .and_then(|t| serde_json::to_value(t).ok()),
        )
    })
    .or_else(|| {
        time(
            e.metadata
                .creation_timestamp
                .as_ref()
                .and_then(|t| serde_json::to_value(t).ok()),
        )
    })
    .map(|t| sortable(&t))
    .unwrap_or_default();
    let o = &e.involved_object;
    let object = match o.namespace.as_deref().filter(|n| !n.is_empty()) {
        Some(ns) => format!(
            "{}/{ns}/{}",
            o.kind.as_deref().unwrap_or("-"),
            o.name.as_deref().unwrap_or("-")
        ),
        None => format!(
            "{}/{}",
            o.kind.as_deref().unwrap_or("-"),
            o.name.as_deref().unwrap_or("-")
        ),
    };
    EventFact {
        at,
        type_: e.type_.clone().unwrap_or_default(),
        reason: e.reason.clone().unwrap_or_default(),
        message: e.message.clone().unwrap_or_default(),
        count: e
            .series
            .as_ref()
            .and_then(|s| s.count)
            .or(e.count)
            .map_or(1, i64::from),
        object,
    }
}

/// RFC 3339 with microseconds, so times of second and microsecond precision sort as text.
fn sortable(t: &str) -> String {
    match t.strip_suffix('Z') {
        Some(base) if !base.contains('.') => format!("{base}.000000Z"),
        _ => t.to_string(),
    }
}

async fn events(client: &kube::Client, s: &Subject) -> anyhow::Result<Vec<EventFact>> {
    let api: Api<Event> = if s.kind.namespaced {
        Api::namespaced(client.clone(), &s.namespace)
    } else {
        Api::all(client.clone())
    };
    let fields = format!(
        "involvedObject.kind={},involvedObject.name={}",
        s.kind.kind, s.name
    );
    let list = api
        .list(&ListParams::default().fields(&fields).limit(500))
        .await
        .map_err(|e| anyhow::anyhow!("listing Events of {s}: {e}"))?;
    Ok(list.items.iter().map(event_fact).collect())
}

/// The newest records about `keys` in one journal; an unreadable journal is reported in the
/// answer, not fatal (the API's view still helps).
pub fn journal_facts(src: &Source, keys: &[ObjectFilter], per_object: usize) -> JournalFacts {
    let mut out = JournalFacts {
        label: src.label.clone(),
        node: src.node.clone(),
        path: src.path.display().to_string(),
        ..JournalFacts::default()
    };
    let j = match super::journal::private_copy(&src.path) {
        Ok(j) => j,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    let mut by_seq = BTreeMap::new();
    for k in keys {
        let filter = Filter {
            object: Some(k.clone()),
            limit: Some(per_object),
            ..Filter::default()
        };
        match j.query(&filter) {
            Ok(entries) => {
                for e in entries {
                    match e {
                        Entry::Record { record, open } => {
                            by_seq.insert(record.seq, (record, open));
                        }
                        Entry::Corrupt(c) => out.corrupt.push(c.to_string()),
                    }
                }
            }
            Err(e) => {
                out.error = Some(format!("querying {k}: {e}"));
                break;
            }
        }
    }
    out.records = by_seq.into_values().collect();
    out
}

async fn gather(args: &ExplainArgs, subject: Subject) -> anyhow::Result<Facts> {
    let sources = args.journals.sources()?;
    let client = kube::Client::try_default().await?;
    let object = read(&client, subject.kind, &subject.namespace, &subject.name).await?;
    let owner = match &object {
        Some(o) if subject.kind.kind == "LVMVolumeGroup" => {
            let owner_name = o
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|r| r.get("kind").and_then(Value::as_str) == Some("LVMCluster"))
                .and_then(|r| r.get("name").and_then(Value::as_str))
                .map(str::to_string);
            match owner_name {
                Some(n) => read(&client, LVM_CLUSTER, &subject.namespace, &n).await?,
                None => None,
            }
        }
        _ => None,
    };
    let events = events(&client, &subject).await?;
    let subject_for_keys = subject.clone();
    let obj_for_keys = object.clone();
    // Journal copies and queries are blocking file work.
    let journals = tokio::task::spawn_blocking(move || {
        sources
            .iter()
            .map(|src| {
                let keys = match &src.node {
                    Some(n) => related::node_keys(&subject_for_keys, obj_for_keys.as_ref(), n),
                    None => related::operator_keys(&subject_for_keys, obj_for_keys.as_ref()),
                };
                journal_facts(src, &keys, PER_OBJECT)
            })
            .collect::<Vec<_>>()
    })
    .await?;
    let jaeger = args.jaeger.clone().or_else(|| {
        std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT")
            .ok()
            .and_then(|e| jaeger_from_otlp(&e))
    });
    Ok(Facts {
        subject,
        object,
        owner,
        events,
        journals,
        jaeger,
    })
}

pub fn run(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    let subject: Subject = args.object.parse().map_err(anyhow::Error::msg)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let facts = rt.block_on(gather(&args, subject))?;
    let e = explain(&facts);
    match args.output {
        Format::Text => print!("{}", render_text(&e)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&e)?),
    }
    Ok(ExitCode::SUCCESS)
}
