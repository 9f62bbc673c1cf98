//! Bounds shared by the long-lived streams (WebSocket chats, gRPC `Converse`): how many may be
//! open at once (in all and per caller), and one memory budget for the utterances their
//! clients are sending, so that many clients each buffering a long utterance cannot exhaust the
//! board's memory.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::Config;
use crate::engine::access::Owner;

/// The places and the budget, shared by every stream.
pub struct Streams {
    websockets: Arc<Semaphore>,
    grpc: Arc<Semaphore>,
    /// The places of each kind in all.
    max_websockets: usize,
    max_grpc: usize,
    /// Places each caller holds now (both kinds), and how many one may hold.
    held: Arc<Mutex<HashMap<(Owner, Kind), usize>>>,
    per_owner: usize,
    budget: Arc<Budget>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    WebSocket,
    Grpc,
}

/// One stream's place, in all and of its caller; given back when dropped.
pub struct Place {
    _permit: OwnedSemaphorePermit,
    held: Arc<Mutex<HashMap<(Owner, Kind), usize>>>,
    key: (Owner, Kind),
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.key);
            }
        }
    }
}

impl Streams {
    pub fn new(config: &Config) -> Streams {
        Streams {
            websockets: Arc::new(Semaphore::new(config.connections.max_websockets)),
            grpc: Arc::new(Semaphore::new(config.connections.max_grpc_streams)),
            max_websockets: config.connections.max_websockets,
            max_grpc: config.connections.max_grpc_streams,
            held: Arc::default(),
            per_owner: config.sessions.max_streams_per_client,
            budget: Arc::new(Budget {
                limit: config.connections.stream_buffer_bytes,
                used: AtomicUsize::new(0),
            }),
        }
    }

    /// A place for one more WebSocket of `owner`, held as long as the socket lives; None when
    /// all are taken or the caller holds its share (`sessions.max_streams_per_client`; the
    /// administrator is not limited).
    pub fn websocket(&self, owner: &Owner) -> Option<Place> {
        self.place(&self.websockets, owner, Kind::WebSocket)
    }

    /// WebSocket chats open now (their places taken).
    pub fn open_websockets(&self) -> usize {
        self.max_websockets - self.websockets.available_permits()
    }

    /// gRPC streams open now.
    pub fn open_grpc(&self) -> usize {
        self.max_grpc - self.grpc.available_permits()
    }

    /// A place for one more gRPC stream of `owner` (as `websocket`).
    pub fn grpc(&self, owner: &Owner) -> Option<Place> {
        self.place(&self.grpc, owner, Kind::Grpc)
    }

    fn place(&self, all: &Arc<Semaphore>, owner: &Owner, kind: Kind) -> Option<Place> {
        let key = (owner.clone(), kind);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let mine = held.get(&key).copied().unwrap_or(0);
        if *owner != Owner::Admin && mine >= self.per_owner {
            return None;
        }
        let permit = all.clone().try_acquire_owned().ok()?;
        *held.entry(key.clone()).or_default() += 1;
        Some(Place {
            _permit: permit,
            held: self.held.clone(),
            key,
        })
    }

    /// An empty buffer counted against the shared budget.
    pub fn buffer(&self) -> Buffer {
        Buffer {
            budget: self.budget.clone(),
            bytes: Vec::new(),
        }
    }
}

struct Budget {
    limit: usize,
    used: AtomicUsize,
}

/// Bytes of one utterance; what it holds is given back to the budget when it is dropped.
pub struct Buffer {
    budget: Arc<Budget>,
    bytes: Vec<u8>,
}

/// The shared budget has no room for more bytes.
#[derive(Debug)]
pub struct OverBudget;

impl Buffer {
    /// Appends `more`, or refuses when the shared budget would be exceeded.
    pub fn extend(&mut self, more: &[u8]) -> Result<(), OverBudget> {
        let budget = &self.budget;
        budget
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(more.len()).filter(|&n| n <= budget.limit)
            })
            .map_err(|_| OverBudget)?;
        self.bytes.extend_from_slice(more);
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.budget
            .used
            .fetch_sub(self.bytes.len(), Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_share_the_budget_and_give_it_back_when_dropped() {
        let mut config = Config::default();
        config.connections.stream_buffer_bytes = 10;
        let streams = Streams::new(&config);
        let mut a = streams.buffer();
        let mut b = streams.buffer();
        a.extend(&[0; 6]).unwrap();
        assert!(b.extend(&[0; 5]).is_err());
        b.extend(&[0; 4]).unwrap();
        drop(a);
        b.extend(&[0; 6]).unwrap();
        assert_eq!(b.len(), 10);
    }
}
