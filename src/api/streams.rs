//! Bounds shared by the long-lived streams (WebSocket chats, gRPC `Converse`): how many may be
//! open at once, and one memory budget for the utterances their clients are sending, so that
//! many clients each buffering a long utterance cannot exhaust the board's memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::Config;

/// The places and the budget, shared by every stream.
pub struct Streams {
    websockets: Arc<Semaphore>,
    grpc: Arc<Semaphore>,
    budget: Arc<Budget>,
}

impl Streams {
    pub fn new(config: &Config) -> Streams {
        Streams {
            websockets: Arc::new(Semaphore::new(config.max_websockets)),
            grpc: Arc::new(Semaphore::new(config.max_grpc_streams)),
            budget: Arc::new(Budget {
                limit: config.stream_buffer_bytes,
                used: AtomicUsize::new(0),
            }),
        }
    }

    /// A place for one more WebSocket, held as long as the socket lives; None when full.
    pub fn websocket(&self) -> Option<OwnedSemaphorePermit> {
        self.websockets.clone().try_acquire_owned().ok()
    }

    /// A place for one more gRPC stream; None when full.
    pub fn grpc(&self) -> Option<OwnedSemaphorePermit> {
        self.grpc.clone().try_acquire_owned().ok()
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
        let config = Config {
            stream_buffer_bytes: 10,
            ..Config::default()
        };
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
