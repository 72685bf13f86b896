//! Answering a connection over the cap: a complete 503 problem, then close.

use super::*;

/// Answers a connection over the cap with a 503 problem and closes it.
pub(super) async fn refuse(stream: TcpStream, tls: Option<TlsAcceptor>, handshake: Duration) {
    crate::telemetry::connection_cut("over_limit");
    let answer = refusal_response();
    match tls {
        None => {
            let _ = tokio::time::timeout(REFUSAL_TIME, send_refusal(stream, &answer)).await;
        }
        Some(acceptor) => {
            if let Ok(Ok(stream)) = tokio::time::timeout(handshake, acceptor.accept(stream)).await {
                let _ = tokio::time::timeout(REFUSAL_TIME, send_refusal(stream, &answer)).await;
            }
        }
    }
}

/// The complete HTTP/1.1 answer to a connection over the cap.
pub(super) fn refusal_response() -> Vec<u8> {
    let request_id = uuid::Uuid::new_v4().to_string();
    let problem = Problem::new(
        ErrorCode::TooManyConnections,
        "the server is serving as many connections as it is configured to; retry shortly",
    )
    .with_retry_after(REFUSAL_RETRY_AFTER_SECS);
    let (status, body) = problem::standalone(&problem, &request_id);
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: {PROBLEM_JSON}\r\ncontent-length: {}\r\n\
         retry-after: {REFUSAL_RETRY_AFTER_SECS}\r\nx-request-id: {request_id}\r\n\
         connection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    );
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&body);
    bytes
}

/// Writes the answer, ends the sending side, then reads what the client sent until it
/// closes (bounded), so the close is orderly.
pub(super) async fn send_refusal<IO: AsyncRead + AsyncWrite + Unpin>(
    mut io: IO,
    answer: &[u8],
) -> io::Result<()> {
    io.write_all(answer).await?;
    io.flush().await?;
    io.shutdown().await?;
    let mut sink = [0u8; 4096];
    let mut drained = 0;
    while drained < REFUSAL_DRAIN_BYTES {
        let n = io.read(&mut sink).await?;
        if n == 0 {
            break;
        }
        drained += n;
    }
    Ok(())
}
