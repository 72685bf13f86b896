//! Tenants pinned to a shard of their own: one record per pinned tenant in the catalog
//! bucket (`pin.<tenant as hex>`), and one reservation per pinned shard (`pinned.<shard>`).
//!
//! A pinned shard's number is at least the cluster's shard count, so no tenant's hash
//! lands on it: only its tenant lives there. Its streams are named like any shard's.
//!
//! Invariants: a pinned shard number is reserved by a create, so two pins never share one;
//! a pin record moves `copying` → `active` by compare-and-set against the revision its
//! copier wrote, and only an active pin routes the tenant (while it is `copying`, the
//! tenant is served, frozen, by its hashed shard's owner); a pin is never removed once
//! active (the tenant's records left its hashed shard).

use async_nats::jetstream::kv;
use serde::{Deserialize, Serialize};

use super::catalog::Catalog;
use super::lease::LeaseError;

/// Where a pinned tenant is in its move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PinState {
    /// Its records are being copied to the new shard; it is served (frozen) where it was.
    Copying,
    /// It lives on the new shard.
    Active,
}

/// A tenant's pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pin {
    /// The tenant.
    pub tenant: String,
    /// Its shard of its own.
    pub shard: u32,
    /// The shard its hash gives, where it lived before.
    pub from: u32,
    /// Where the move is.
    pub state: PinState,
    /// The node that copies (or copied) it.
    pub node: String,
    /// That node's lease epoch on `from` when it began.
    pub epoch: u64,
    /// Whether `from`'s log no longer holds any of its records.
    pub source_purged: bool,
}

fn pin_key(tenant: &str) -> String {
    format!("pin.{}", hex::encode(tenant.as_bytes()))
}

fn reservation_key(shard: u32) -> String {
    format!("pinned.{shard}")
}

/// How far above the hashed shards a reservation looks for a free number.
const MAX_PINNED: u32 = 100_000;

impl Catalog {
    /// Every pin, with its record's revision.
    pub fn pins(&self) -> Result<Vec<(Pin, u64)>, LeaseError> {
        self.entries("pin.")?
            .into_iter()
            .map(|(_, value, revision)| {
                serde_json::from_slice(&value)
                    .map(|pin| (pin, revision))
                    .map_err(|e| self.failed(format!("unreadable pin record: {e}")))
            })
            .collect()
    }

    /// `tenant`'s pin, with its record's revision.
    pub fn pin(&self, tenant: &str) -> Result<Option<(Pin, u64)>, LeaseError> {
        let store = self.store.clone();
        let key = pin_key(tenant);
        let entry = self
            .conn
            .run(&self.bucket, async move { store.entry(key).await })
            .map_err(|e| self.failed(e))?
            .map_err(|e| self.failed(e))?;
        match entry {
            Some(e) if e.operation == kv::Operation::Put => {
                let pin = serde_json::from_slice(&e.value)
                    .map_err(|err| self.failed(format!("unreadable pin record: {err}")))?;
                Ok(Some((pin, e.revision)))
            }
            _ => Ok(None),
        }
    }

    /// Writes `pin`: created when `revision` is `None`, else only over that revision. The
    /// new revision, or `None` when another write came first.
    pub fn write_pin(&self, pin: &Pin, revision: Option<u64>) -> Result<Option<u64>, LeaseError> {
        let store = self.store.clone();
        let key = pin_key(&pin.tenant);
        let value = serde_json::to_vec(pin).map_err(|e| self.failed(e))?;
        let written = self
            .conn
            .run(&self.bucket, async move {
                match revision {
                    None => store
                        .create(key, value.into())
                        .await
                        .map_err(|e| e.to_string()),
                    Some(rev) => store
                        .update(key, value.into(), rev)
                        .await
                        .map_err(|e| e.to_string()),
                }
            })
            .map_err(|e| self.failed(e))?;
        Ok(written.ok())
    }

    /// Removes an abandoned (never active) pin at `revision`, and its shard's reservation.
    pub fn drop_pin(&self, pin: &Pin, revision: u64) -> Result<(), LeaseError> {
        let store = self.store.clone();
        let (key, reservation) = (pin_key(&pin.tenant), reservation_key(pin.shard));
        self.conn
            .run(&self.bucket, async move {
                store
                    .delete_expect_revision(key, Some(revision))
                    .await
                    .map_err(|e| e.to_string())?;
                store.purge(reservation).await.map_err(|e| e.to_string())
            })
            .map_err(|e| self.failed(e))?
            .map_err(|e| self.failed(e))
    }

    /// Reserves the lowest free pinned shard number from `first` on for `tenant`.
    pub fn reserve_shard(&self, first: u32, tenant: &str) -> Result<u32, LeaseError> {
        let store = self.store.clone();
        let value = tenant.as_bytes().to_vec();
        self.conn
            .run(&self.bucket, async move {
                for shard in first..first.saturating_add(MAX_PINNED) {
                    let key = reservation_key(shard);
                    match store.create(&key, value.clone().into()).await {
                        Ok(_) => return Ok(shard),
                        Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => continue,
                        Err(e) => return Err(e.to_string()),
                    }
                }
                Err(format!("no free pinned shard among {MAX_PINNED}"))
            })
            .map_err(|e| self.failed(e))?
            .map_err(|e| self.failed(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_keys_are_valid_for_any_tenant() {
        let key = pin_key("acme corp/ü");
        assert!(key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.'));
        assert_ne!(pin_key("a"), pin_key("b"));
        let pin = Pin {
            tenant: "t".into(),
            shard: 64,
            from: 3,
            state: PinState::Copying,
            node: "n1".into(),
            epoch: 7,
            source_purged: false,
        };
        let json = serde_json::to_value(&pin).expect("json");
        assert_eq!(json["state"], "copying");
        assert_eq!(json["sourcePurged"], false);
    }
}
