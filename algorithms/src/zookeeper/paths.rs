//! Making the persistent nodes a lock lives under.

use super::store::{CreateMode, ZkStore};

/// Creates every proper ancestor of `path` (`/a` and `/a/b` for `/a/b/c`) as a persistent node.
/// Whoever made one first wins; a failure shows in the create that follows, so errors are
/// ignored here. Curator does this only when a create says a parent is missing, which spares a
/// write per acquisition.
pub(crate) async fn create_ancestors<S: ZkStore>(store: &S, path: &str) {
    for (i, _) in path.match_indices('/').skip(1) {
        let _ = store
            .create(&path[..i], Vec::new(), CreateMode::Persistent)
            .await;
    }
}
