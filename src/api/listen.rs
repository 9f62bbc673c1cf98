//! The one listener: plain HTTP and HTTPS on the same port, told apart by the first byte of
//! each connection (0x16 opens a TLS handshake), under bounds a LAN client cannot stretch:
//! connections at once (in all, per client address and per client network), time to send
//! headers or finish the handshake, and time without a byte either way. When a cap is reached, a
//! newcomer takes the place of an idle connection of whoever holds the most, so no address or
//! network can keep the others out by holding the last places.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::app::App;
use super::metrics::Refusal;
use super::tls::Tls;
use crate::config::Config;

/// First byte of a TLS record carrying a handshake.
const TLS_HANDSHAKE: u8 = 0x16;
/// HTTP/2 streams at once on one connection.
const H2_STREAMS: u32 = 16;
/// HTTP/2 flow-control windows: how much of its request bodies a client may send ahead of the
/// handlers reading them (what the connection buffers, unread, at most).
const H2_STREAM_WINDOW: u32 = 128 * 1024;
const H2_CONNECTION_WINDOW: u32 = 256 * 1024;

/// How the request reached us, as a request extension: the client's address (the access
/// rules, the login's throttle), and whether the connection is encrypted (the session cookie,
/// the admin login). One extension, as each costs every request an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transport {
    pub peer: SocketAddr,
    pub tls: bool,
}

/// Serves `app` on `listener` until `shutdown` completes, then lets the connections in
/// flight finish their current request.
pub async fn serve(
    listener: TcpListener,
    app: App,
    tls: Arc<Tls>,
    config: &Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let admission = Arc::new(Admission {
        total: config.connections.max,
        per_peer: config.connections.max_per_peer,
        per_subnet: config.connections.max_per_subnet,
        loopback_reserved: config.access.loopback_is_trusted,
        open: Mutex::default(),
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(
            config.connections.header_read_timeout_ms,
        ));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(H2_STREAMS)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW);
    // The refusals are counted for `GET /metrics`.
    let refusals = app.state().clone();
    let refusals = &refusals.http;
    let shared = Arc::new(Shared {
        builder,
        app,
        acceptor: tokio_rustls::TlsAcceptor::from(tls.config.clone()),
        header_timeout: Duration::from_millis(config.connections.header_read_timeout_ms),
        idle: Duration::from_secs(config.connections.idle_timeout_secs.max(1)),
    });
    let stop = CancellationToken::new();
    let tasks = TaskTracker::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors or a connection reset before accept: wait a little
                    // rather than spin.
                    tracing::debug!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let permit = match admission.admit(peer.ip()) {
            Ok(permit) => permit,
            Err(full) => {
                tracing::debug!(%peer, "connection refused: too many open ({full:?})");
                refusals.refused(match full {
                    Full::Peer => Refusal::Peer,
                    Full::Subnet => Refusal::Subnet,
                    Full::Total => Refusal::Total,
                });
                drop(tcp);
                continue;
            }
        };
        // Replies stream in small frames (deltas, audio chunks); Nagle's algorithm would hold
        // each one back for a delayed ACK.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
        tasks.spawn(connection(tcp, peer, permit, shared.clone(), stop.clone()));
    }
    stop.cancel();
    tasks.close();
    tasks.wait().await;
    Ok(())
}

/// What every connection task shares.
struct Shared {
    builder: auto::Builder<TokioExecutor>,
    app: App,
    acceptor: tokio_rustls::TlsAcceptor,
    header_timeout: Duration,
    idle: Duration,
}

async fn connection(
    tcp: TcpStream,
    peer: SocketAddr,
    permit: Permit,
    shared: Arc<Shared>,
    stop: CancellationToken,
) {
    // A connection whose place went to a newcomer (it had no request in progress) ends here,
    // whatever it was doing: reading a header, a handshake, waiting.
    let evicted = permit.conn.evicted.clone();
    tokio::select! {
        () = serve_tcp(tcp, peer, permit, shared, stop) => {}
        () = evicted.cancelled() => tracing::debug!(%peer, "idle connection closed for a newcomer"),
    }
}

async fn serve_tcp(
    tcp: TcpStream,
    peer: SocketAddr,
    permit: Permit,
    shared: Arc<Shared>,
    stop: CancellationToken,
) {
    // A client that connects and sends nothing is bounded like one that sends half a header.
    let mut first = [0u8; 1];
    let tls = match tokio::time::timeout(shared.header_timeout, tcp.peek(&mut first)).await {
        Ok(Ok(1)) => first[0] == TLS_HANDSHAKE,
        _ => return,
    };
    let requests = permit.conn.clone();
    let io = Metered::new(tcp, permit);
    let activity = io.activity.clone();
    if tls {
        let handshake = shared.acceptor.accept(io);
        match tokio::time::timeout(shared.header_timeout, handshake).await {
            Ok(Ok(stream)) => {
                serve_http(stream, peer, true, activity, requests, shared, stop).await
            }
            Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
            Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
        }
    } else {
        serve_http(io, peer, false, activity, requests, shared, stop).await;
    }
}

async fn serve_http<I>(
    io: I,
    peer: SocketAddr,
    tls: bool,
    activity: Arc<Activity>,
    requests: Arc<Conn>,
    shared: Arc<Shared>,
    stop: CancellationToken,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let counted = requests.clone();
    let handle = shared.clone();
    let service = hyper::service::service_fn(move |mut req: hyper::Request<_>| {
        req.extensions_mut().insert(Transport { peer, tls });
        // The request is in progress until its response body is done (a stream's too).
        let guard = counted.start();
        let shared = handle.clone();
        let upgrading = counted.clone();
        async move {
            let response = shared.app.answer(req.map(axum::body::Body::new)).await;
            if response.status() == hyper::StatusCode::SWITCHING_PROTOCOLS {
                // A WebSocket: busy for as long as the socket is open.
                upgrading.upgraded();
            }
            Ok::<_, std::convert::Infallible>(response.map(|body| Counted {
                body,
                _guard: guard,
            }))
        }
    });
    let conn = shared
        .builder
        .serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::pin!(conn);
    let mut stopped = stop_signal(stop);
    let mut stopping = false;
    loop {
        // A connection moving no byte is closed after `idle`; one with no request in progress
        // after the header timeout, whatever it moves (HTTP/2 PINGs, settings): an idle
        // connection holds a place another client needs.
        let silent = activity.last() + shared.idle;
        let unused = requests.idle_since().map(|t| t + shared.header_timeout);
        let deadline = unused.map_or(silent, |u| u.min(silent));
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, "connection ended: {e}");
                }
                return;
            }
            _ = &mut stopped, if !stopping => {
                conn.as_mut().graceful_shutdown();
                stopping = true;
            }
            () = tokio::time::sleep_until(deadline) => {
                let now = Instant::now();
                if activity.last() + shared.idle <= now {
                    tracing::debug!(%peer, "idle connection closed");
                    return;
                }
                if requests.idle_since().is_some_and(|t| t + shared.header_timeout <= now) {
                    if stopping {
                        // Asked to go away and still holding on with nothing in progress.
                        return;
                    }
                    tracing::debug!(%peer, "connection without a request closed");
                    conn.as_mut().graceful_shutdown();
                    stopping = true;
                }
            }
        }
    }
}

/// Completes when the server stops (or its task is gone), for one connection.
///
/// The connection's task is polled at every read and write, and each poll of the server's
/// token itself would take two locks that every connection shares: a task of its own waits on
/// the token, and the connection polls a channel of its own (an atomic load). The task ends
/// with the connection.
fn stop_signal(stop: CancellationToken) -> tokio::sync::oneshot::Receiver<()> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut tx = tx;
        let stopping = tokio::select! {
            () = stop.cancelled() => true,
            () = tx.closed() => false,
        };
        if stopping {
            let _ = tx.send(());
        }
    });
    rx
}

/// One open connection: who opened it, its requests in progress (and since when there has been
/// none), and the token that closes it when its place goes to a newcomer.
struct Conn {
    ip: IpAddr,
    /// Counted in all and per network (not the kiosk's own).
    shared: bool,
    state: Mutex<Requests>,
    evicted: CancellationToken,
}

struct Requests {
    open: usize,
    since: Instant,
    /// Upgraded to a WebSocket: never idle again.
    upgraded: bool,
}

impl Conn {
    fn lock(&self) -> std::sync::MutexGuard<'_, Requests> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn start(self: &Arc<Self>) -> RequestGuard {
        self.lock().open += 1;
        RequestGuard(self.clone())
    }

    fn upgraded(&self) {
        self.lock().upgraded = true;
    }

    /// When the last request ended, if none is in progress.
    fn idle_since(&self) -> Option<Instant> {
        let r = self.lock();
        (r.open == 0 && !r.upgraded).then_some(r.since)
    }

    /// Closes the connection if it is still idle (decided under the lock a request's start
    /// takes, so a request that has begun is never cut).
    fn evict_if_idle(&self) -> bool {
        let r = self.lock();
        let idle = r.open == 0 && !r.upgraded;
        if idle {
            self.evicted.cancel();
        }
        idle
    }
}

/// One request in progress; dropped with its response body.
struct RequestGuard(Arc<Conn>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let mut r = self.0.lock();
        r.open -= 1;
        r.since = Instant::now();
    }
}

/// A response body that keeps its request counted as in progress until it is dropped.
struct Counted {
    body: axum::body::Body,
    _guard: RequestGuard,
}

impl hyper::body::Body for Counted {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Connections open now: in all, per client address and per client network. The kiosk's own
/// (trusted loopback) connections count only per address, so the LAN cannot take their places.
struct Admission {
    total: usize,
    per_peer: usize,
    per_subnet: usize,
    loopback_reserved: bool,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    total: usize,
    per_peer: HashMap<IpAddr, usize>,
    per_subnet: HashMap<IpAddr, usize>,
    conns: HashMap<u64, Arc<Conn>>,
    next: u64,
}

/// The network of an address: its IPv4 /24, its IPv6 /64.
fn subnet(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4((u32::from(v4) & 0xffff_ff00).into()),
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
    }
}

/// Takes one off a count of a map, removing it at zero.
fn release(map: &mut HashMap<IpAddr, usize>, key: IpAddr) {
    if let Some(n) = map.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            map.remove(&key);
        }
    }
}

/// The cap a newcomer meets, and so among whose connections one makes room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Full {
    /// Its own address: one of its own idle connections.
    Peer,
    /// Its network: one of the address of the network that holds the most.
    Subnet,
    /// All places: one of the network that holds the most, of its address that holds the most.
    Total,
}

impl Open {
    fn count(map: &HashMap<IpAddr, usize>, key: IpAddr) -> usize {
        map.get(&key).copied().unwrap_or(0)
    }

    /// Frees the counts of connection `id`, if it still holds a place.
    fn remove(&mut self, id: u64) -> Option<Arc<Conn>> {
        let conn = self.conns.remove(&id)?;
        release(&mut self.per_peer, conn.ip);
        if conn.shared {
            self.total -= 1;
            release(&mut self.per_subnet, subnet(conn.ip));
        }
        Some(conn)
    }

    /// The idle connection whose place goes to a newcomer from `ip` that meets `full`: of the
    /// holder (address, or network then address) with the most, the one idle longest. A holder
    /// other than the newcomer's own gives a place only if it holds more than the newcomer's.
    fn victim(&self, ip: IpAddr, full: Full) -> Option<u64> {
        let net = subnet(ip);
        let own_peer = Self::count(&self.per_peer, ip);
        let own_net = Self::count(&self.per_subnet, net);
        self.conns
            .iter()
            .filter(|(_, c)| match full {
                Full::Peer => c.ip == ip,
                Full::Subnet => {
                    c.shared
                        && subnet(c.ip) == net
                        && (c.ip == ip || Self::count(&self.per_peer, c.ip) > own_peer)
                }
                Full::Total => {
                    c.shared
                        && (subnet(c.ip) == net
                            || Self::count(&self.per_subnet, subnet(c.ip)) > own_net)
                }
            })
            .filter_map(|(id, c)| {
                let since = c.idle_since()?;
                let from_net = match full {
                    Full::Total => Self::count(&self.per_subnet, subnet(c.ip)),
                    Full::Peer | Full::Subnet => 0,
                };
                let from_peer = Self::count(&self.per_peer, c.ip);
                // The most places held first, then the longest idle.
                Some(((from_net, from_peer, std::cmp::Reverse(since)), *id))
            })
            .max()
            .map(|(_, id)| id)
    }
}

impl Admission {
    /// A permit for one more connection from `ip`; when a cap is reached, the place of an idle
    /// connection of whoever holds the most (closed for it), or None when every such
    /// connection has a request in progress.
    fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Permit, Full> {
        let ip = ip.to_canonical();
        let shared = !(self.loopback_reserved && ip.is_loopback());
        let net = subnet(ip);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        // Each eviction frees a place under the cap the newcomer meets, until none is met.
        loop {
            let full = if Open::count(&open.per_peer, ip) >= self.per_peer {
                Full::Peer
            } else if shared && Open::count(&open.per_subnet, net) >= self.per_subnet {
                Full::Subnet
            } else if shared && open.total >= self.total {
                Full::Total
            } else {
                break;
            };
            let id = open.victim(ip, full).ok_or(full)?;
            let conn = open.conns.get(&id).expect("a victim is open").clone();
            // One that began a request since it was chosen is idle no longer: not chosen again.
            if conn.evict_if_idle() {
                open.remove(id);
            }
        }
        *open.per_peer.entry(ip).or_default() += 1;
        if shared {
            *open.per_subnet.entry(net).or_default() += 1;
            open.total += 1;
        }
        let id = open.next;
        open.next += 1;
        let conn = Arc::new(Conn {
            ip,
            shared,
            state: Mutex::new(Requests {
                open: 0,
                since: Instant::now(),
                upgraded: false,
            }),
            evicted: CancellationToken::new(),
        });
        open.conns.insert(id, conn.clone());
        Ok(Permit {
            admission: self.clone(),
            id,
            conn,
        })
    }
}

/// One open connection; dropping it (when the socket is closed, also after a WebSocket
/// upgrade) frees its place, unless a newcomer took it already.
struct Permit {
    admission: Arc<Admission>,
    id: u64,
    conn: Arc<Conn>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut open = self
            .admission
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        open.remove(self.id);
    }
}

/// When a connection last moved a byte.
struct Activity {
    origin: Instant,
    millis: AtomicU64,
}

impl Activity {
    fn touch(&self) {
        let now = self.origin.elapsed().as_millis() as u64;
        self.millis.store(now, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.origin + Duration::from_millis(self.millis.load(Ordering::Relaxed))
    }
}

/// The TCP stream, noting each byte moved and holding the connection's place (given back
/// before the socket closes, so a client that sees the close can connect again at once).
struct Metered {
    _permit: Permit,
    tcp: TcpStream,
    activity: Arc<Activity>,
}

impl Metered {
    fn new(tcp: TcpStream, permit: Permit) -> Metered {
        Metered {
            _permit: permit,
            tcp,
            activity: Arc::new(Activity {
                origin: Instant::now(),
                millis: AtomicU64::new(0),
            }),
        }
    }
}

impl AsyncRead for Metered {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.tcp).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Metered {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.tcp).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}
