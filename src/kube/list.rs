//! Every object of a kind, read in pages: what the post-mortem commands list.

use kube::Api;
use kube::api::ListParams;

/// Every object `api` lists, in pages of 500 (one answer per page, so a large cluster's list
/// never arrives in one response).
pub async fn list_pages<K>(api: &Api<K>) -> Result<Vec<K>, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(500);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await?;
        out.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => token = Some(c),
            None => return Ok(out),
        }
    }
}
