//! A raw HTTP/1.1 server on 127.0.0.1 that misbehaves on purpose, below the level a web
//! framework allows: it resets connections, stalls mid-body, declares more bytes than it sends,
//! sends endless bodies and endless event-stream lines. Each connection reads one request and
//! plays the next scripted [`Fault`] (or the default one); every request is counted.
//!
//! [`unreachable_address`] gives an address whose connections never complete, for connect
//! timeouts.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// What the server does with one request.
#[derive(Clone, Debug)]
pub enum Fault {
    /// A complete response.
    Respond {
        /// HTTP status.
        status: u16,
        /// Extra headers (`Content-Length` is added).
        headers: Vec<(String, String)>,
        /// The body.
        body: Vec<u8>,
    },
    /// Close the connection at once with a TCP reset, no response.
    Reset,
    /// Send the status line, headers (declaring `declared` bytes) and `sent`, then hang.
    Stall {
        /// `Content-Type` of the response.
        content_type: &'static str,
        /// The declared `Content-Length` (`None`: no length, as a stream).
        declared: Option<usize>,
        /// What is sent before the stall.
        sent: Vec<u8>,
    },
    /// Declare `declared` bytes, send `sent` (fewer), close.
    Truncated {
        /// The declared `Content-Length`.
        declared: usize,
        /// What is sent.
        sent: Vec<u8>,
    },
    /// A 200 response whose body is `bytes` long (generated, not held in memory), optionally
    /// without a declared length.
    Huge {
        /// Body length.
        bytes: usize,
        /// Whether `Content-Length` is declared.
        declare: bool,
    },
    /// A 200 `text/event-stream` whose first line is `data: ` followed by `bytes` bytes with no
    /// line end.
    EndlessSseLine {
        /// Length of the line.
        bytes: usize,
    },
}

impl Fault {
    /// A JSON response.
    pub fn json(status: u16, body: &serde_json::Value) -> Self {
        Fault::Respond {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }

    /// A JSON response with extra headers.
    pub fn json_with(status: u16, body: &serde_json::Value, headers: &[(&str, &str)]) -> Self {
        let mut headers: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect();
        headers.push(("content-type".into(), "application/json".into()));
        Fault::Respond {
            status,
            headers,
            body: body.to_string().into_bytes(),
        }
    }

    /// A 200 response with a body that is not JSON.
    pub fn not_json() -> Self {
        Fault::Respond {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: b"<html><body>502 Bad Gateway</body></html>".to_vec(),
        }
    }
}

#[derive(Default)]
struct Script {
    faults: VecDeque<Fault>,
    default: Option<Fault>,
}

/// The server; it stops when dropped.
pub struct FaultServer {
    addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultServer {
    /// Starts a server on an ephemeral port of 127.0.0.1.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let script = Arc::new(Mutex::new(Script::default()));
        let requests = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn({
            let (script, requests) = (script.clone(), requests.clone());
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let (script, requests) = (script.clone(), requests.clone());
                    tokio::spawn(async move {
                        let _ = serve(stream, &script, &requests).await;
                    });
                }
            }
        });
        Self {
            addr,
            script,
            requests,
            task,
        }
    }

    /// The base URL (`http://127.0.0.1:port/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues a fault for the next request.
    pub fn push(&self, fault: Fault) {
        self.script
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .faults
            .push_back(fault);
    }

    /// What every request gets once the queue is empty.
    pub fn always(&self, fault: Fault) {
        self.script
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .default = Some(fault);
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request (head and `Content-Length` body); `false` if the client went away.
async fn read_request(stream: &mut TcpStream) -> std::io::Result<bool> {
    let mut head = Vec::new();
    let mut byte = [0u8; 4096];
    let end = loop {
        let n = stream.read(&mut byte).await?;
        if n == 0 {
            return Ok(false);
        }
        head.extend_from_slice(&byte[..n]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
    };
    let text = String::from_utf8_lossy(&head[..end]).to_ascii_lowercase();
    let length: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut have = head.len() - end;
    while have < length {
        let n = stream.read(&mut byte).await?;
        if n == 0 {
            return Ok(false);
        }
        have += n;
    }
    Ok(true)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

async fn serve(
    mut stream: TcpStream,
    script: &Mutex<Script>,
    requests: &AtomicUsize,
) -> std::io::Result<()> {
    if !read_request(&mut stream).await? {
        return Ok(());
    }
    requests.fetch_add(1, Ordering::SeqCst);
    let fault = {
        let mut script = script.lock().unwrap_or_else(|p| p.into_inner());
        script.faults.pop_front().or_else(|| script.default.clone())
    };
    let Some(fault) = fault else {
        let body = br#"{"error":{"message":"fault server: nothing scripted","type":"invalid_request_error"}}"#;
        let head = format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await?;
        return stream.write_all(body).await;
    };
    match fault {
        Fault::Respond {
            status,
            headers,
            body,
        } => {
            let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str(&format!(
                "content-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            ));
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(&body).await?;
        }
        Fault::Reset => {
            // Linger 0: close sends RST instead of FIN (blocking on drop, which is immediate
            // with a zero linger, is what tokio's deprecation warns about).
            #[allow(deprecated)]
            stream.set_linger(Some(Duration::ZERO))?;
            drop(stream);
        }
        Fault::Stall {
            content_type,
            declared,
            sent,
        } => {
            let length = declared.map_or(String::new(), |n| format!("content-length: {n}\r\n"));
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\n{length}connection: close\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(&sent).await?;
            stream.flush().await?;
            tokio::time::sleep(Duration::from_secs(3_600)).await;
        }
        Fault::Truncated { declared, sent } => {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {declared}\r\nconnection: close\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(&sent).await?;
            stream.shutdown().await?;
        }
        Fault::Huge { bytes, declare } => {
            let length = if declare {
                format!("content-length: {bytes}\r\n")
            } else {
                String::new()
            };
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{length}connection: close\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).await?;
            write_filler(&mut stream, b"{\"x\":\"", bytes).await?;
        }
        Fault::EndlessSseLine { bytes } => {
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            stream.write_all(head.as_bytes()).await?;
            write_filler(&mut stream, b"event: content_block_delta\ndata: ", bytes).await?;
        }
    }
    Ok(())
}

/// Writes `prefix` and then filler up to `bytes` in all, in 64 KiB pieces; stops quietly when
/// the client hangs up (which is what a capped reader does).
async fn write_filler(stream: &mut TcpStream, prefix: &[u8], bytes: usize) -> std::io::Result<()> {
    stream.write_all(prefix).await?;
    let piece = vec![b'a'; 64 << 10];
    let mut left = bytes.saturating_sub(prefix.len());
    while left > 0 {
        let n = left.min(piece.len());
        if stream.write_all(&piece[..n]).await.is_err() {
            return Ok(());
        }
        left -= n;
    }
    Ok(())
}

/// An address on 127.0.0.1 whose connections never complete: a listener that never accepts,
/// with its backlog filled, so the kernel drops further handshakes. Keep the returned guard
/// alive while it is used.
pub async fn unreachable_address() -> (SocketAddr, impl Drop) {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    let addr = socket.local_addr().expect("address");
    let listener = socket.listen(1).expect("listen");
    // Fill the accept queue (a backlog of n holds n + 1 connections on Linux).
    let mut fillers = Vec::new();
    for _ in 0..4 {
        match tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => fillers.push(stream),
            _ => break,
        }
    }
    struct Guard(
        #[allow(dead_code)] TcpListener,
        #[allow(dead_code)] Vec<TcpStream>,
    );
    impl Drop for Guard {
        fn drop(&mut self) {}
    }
    (addr, Guard(listener, fillers))
}
