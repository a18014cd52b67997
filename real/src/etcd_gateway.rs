//! etcd's v3 API through the JSON gateway its client port serves (`POST /v3/kv/txn`, …): a
//! minimal HTTP/1.1 client and the mapping between the gateway's JSON and the algorithms' etcd
//! types.
//!
//! Why the gateway rather than gRPC: the `etcd-client` crate generates its gRPC code with `protoc`
//! at build time, one more system package for every build; the gateway is the same API on the
//! same port, speaks JSON over HTTP/1.1 (which the TCP proxies relay as they relay everything
//! else), and needs nothing but `serde_json` and `base64`. Keys and values are base64; 64-bit
//! integers are strings; fields at their zero value are left out.
//!
//! A unary call's answer has a `Content-Length` (or, for an error, a chunked body with gRPC
//! trailers); a watch's is a chunked stream of JSON lines, one per watch response.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use lockcheck_algorithms::etcd::{
    Compare, CompareOp, CompareTarget, KeyValue, Op, OpResult, Range, SortOrder, Txn, TxnResult,
};
use serde_json::{json, Value};
use std::net::SocketAddr;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// What went wrong with one exchange.
#[derive(Debug)]
pub enum HttpError {
    /// Could not connect: nothing was sent.
    Connect(std::io::Error),
    /// The connection broke (or answered something that is not HTTP) after the request may
    /// have been sent.
    Broken(String),
}

/// One HTTP/1.1 connection to a gateway, kept open between requests.
pub struct Connection {
    stream: BufReader<TcpStream>,
}

impl Connection {
    /// Connects to the gateway at `addr`.
    pub async fn open(addr: SocketAddr) -> Result<Connection, HttpError> {
        let stream = TcpStream::connect(addr).await.map_err(HttpError::Connect)?;
        stream.set_nodelay(true).ok();
        Ok(Connection {
            stream: BufReader::new(stream),
        })
    }

    /// `POST path` with `body`; the status and the JSON of the answer.
    pub async fn post(&mut self, path: &str, body: &Value) -> Result<(u16, Value), HttpError> {
        self.send(path, body).await?;
        let (status, chunked, length) = self.head().await?;
        let text = if chunked {
            let mut text = Vec::new();
            while let Some(chunk) = self.chunk().await? {
                text.extend_from_slice(&chunk);
            }
            text
        } else {
            let mut text = vec![0; length.unwrap_or(0)];
            self.stream
                .read_exact(&mut text)
                .await
                .map_err(|e| HttpError::Broken(e.to_string()))?;
            text
        };
        let value = serde_json::from_slice(&text)
            .map_err(|e| HttpError::Broken(format!("not JSON ({e}): {}", lossy(&text))))?;
        Ok((status, value))
    }

    /// `POST path` with `body`, for a streamed answer: read it with [`Connection::next_line`].
    pub async fn post_stream(&mut self, path: &str, body: &Value) -> Result<u16, HttpError> {
        self.send(path, body).await?;
        let (status, _, _) = self.head().await?;
        Ok(status)
    }

    /// The next JSON message of a streamed answer; `None` when the stream ended.
    pub async fn next_line(&mut self) -> Result<Option<Value>, HttpError> {
        // The gateway writes each message as one chunk ending in a newline.
        let Some(chunk) = self.chunk().await? else {
            return Ok(None);
        };
        serde_json::from_slice(&chunk)
            .map(Some)
            .map_err(|e| HttpError::Broken(format!("not JSON ({e}): {}", lossy(&chunk))))
    }

    async fn send(&mut self, path: &str, body: &Value) -> Result<(), HttpError> {
        let body = body.to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: etcd\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.stream
            .get_mut()
            .write_all(request.as_bytes())
            .await
            .map_err(|e| HttpError::Broken(e.to_string()))
    }

    /// The status line and headers: the status, whether the body is chunked, its length.
    async fn head(&mut self) -> Result<(u16, bool, Option<usize>), HttpError> {
        let status_line = self.line().await?;
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| HttpError::Broken(format!("not an HTTP answer: {status_line}")))?;
        let (mut chunked, mut length) = (false, None);
        loop {
            let line = self.line().await?;
            if line.is_empty() {
                return Ok((status, chunked, length));
            }
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            } else if name.eq_ignore_ascii_case("content-length") {
                length = value.parse().ok();
            }
        }
    }

    /// One chunk of a chunked body; `None` after the last (its trailers read).
    async fn chunk(&mut self) -> Result<Option<Vec<u8>>, HttpError> {
        let size_line = self.line().await?;
        let size_text = size_line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| HttpError::Broken(format!("bad chunk size: {size_line}")))?;
        if size == 0 {
            // Trailers, up to an empty line.
            while !self.line().await?.is_empty() {}
            return Ok(None);
        }
        let mut chunk = vec![0; size];
        self.stream
            .read_exact(&mut chunk)
            .await
            .map_err(|e| HttpError::Broken(e.to_string()))?;
        self.line().await?; // the CRLF after the data
        Ok(Some(chunk))
    }

    /// One line without its CRLF; a closed connection is broken.
    async fn line(&mut self) -> Result<String, HttpError> {
        let mut line = String::new();
        let n = self
            .stream
            .read_line(&mut line)
            .await
            .map_err(|e| HttpError::Broken(e.to_string()))?;
        if n == 0 {
            return Err(HttpError::Broken("connection closed".into()));
        }
        Ok(line.trim_end_matches(['\r', '\n']).to_string())
    }
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).chars().take(300).collect()
}

/// Base64 of a key or value.
pub fn b64(text: &str) -> String {
    B64.encode(text.as_bytes())
}

/// The key that ends the range of every key with `prefix` (`clientv3.GetPrefixRangeEnd`).
pub fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte was 0xff: the range runs to the end of the keyspace.
    vec![0]
}

/// A 64-bit integer field: a string in the gateway's JSON, absent at 0.
pub fn int(value: &Value, field: &str) -> i64 {
    match value.get(field) {
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

/// A base64 field as text (absent: empty).
pub fn text(value: &Value, field: &str) -> String {
    value
        .get(field)
        .and_then(Value::as_str)
        .and_then(|s| B64.decode(s).ok())
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

/// A range request's JSON.
pub fn range_json(range: &Range) -> Value {
    let mut request = json!({ "key": b64(&range.key) });
    if range.prefix {
        request["range_end"] = Value::String(B64.encode(prefix_end(&range.key)));
    }
    if let Some(order) = range.sort {
        request["sort_target"] = Value::String("CREATE".into());
        request["sort_order"] = Value::String(
            match order {
                SortOrder::Ascend => "ASCEND",
                SortOrder::Descend => "DESCEND",
            }
            .into(),
        );
    }
    if range.limit > 0 {
        request["limit"] = Value::String(range.limit.to_string());
    }
    if range.max_create_revision > 0 {
        request["max_create_revision"] = Value::String(range.max_create_revision.to_string());
    }
    request
}

fn compare_json(compare: &Compare) -> Value {
    let (target, field) = match compare.target {
        CompareTarget::CreateRevision => ("CREATE", "create_revision"),
        CompareTarget::ModRevision => ("MOD", "mod_revision"),
        CompareTarget::Version => ("VERSION", "version"),
    };
    let result = match compare.op {
        CompareOp::Equal => "EQUAL",
        CompareOp::NotEqual => "NOT_EQUAL",
        CompareOp::Greater => "GREATER",
        CompareOp::Less => "LESS",
    };
    let mut value = json!({ "key": b64(&compare.key), "target": target, "result": result });
    value[field] = Value::String(compare.value.to_string());
    value
}

fn op_json(op: &Op) -> Value {
    match op {
        Op::Range(range) => json!({ "request_range": range_json(range) }),
        Op::Put { key, value, lease } => {
            let mut put = json!({ "key": b64(key), "value": b64(value) });
            if *lease != 0 {
                put["lease"] = Value::String(lease.to_string());
            }
            json!({ "request_put": put })
        }
        Op::Delete { key } => json!({ "request_delete_range": { "key": b64(key) } }),
    }
}

/// A transaction's JSON.
pub fn txn_json(txn: &Txn) -> Value {
    json!({
        "compare": txn.compare.iter().map(compare_json).collect::<Vec<_>>(),
        "success": txn.success.iter().map(op_json).collect::<Vec<_>>(),
        "failure": txn.failure.iter().map(op_json).collect::<Vec<_>>(),
    })
}

/// A key as the gateway returns it.
pub fn key_value(kv: &Value) -> KeyValue {
    KeyValue {
        key: text(kv, "key"),
        value: text(kv, "value"),
        create_revision: int(kv, "create_revision"),
        mod_revision: int(kv, "mod_revision"),
        version: int(kv, "version"),
        lease: int(kv, "lease"),
    }
}

/// The keys of a range answer.
pub fn kvs(answer: &Value) -> Vec<KeyValue> {
    answer
        .get("kvs")
        .and_then(Value::as_array)
        .map(|kvs| kvs.iter().map(key_value).collect())
        .unwrap_or_default()
}

/// The header's revision of an answer.
pub fn revision(answer: &Value) -> i64 {
    answer.get("header").map_or(0, |h| int(h, "revision"))
}

/// A transaction's answer, for the branch `ops` ran (the gateway leaves out a result's fields at
/// their zero value, so the kind of each result is the kind of its operation).
pub fn txn_result(answer: &Value, txn: &Txn) -> TxnResult {
    let succeeded = answer
        .get("succeeded")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let ops = if succeeded {
        &txn.success
    } else {
        &txn.failure
    };
    let responses = answer
        .get("responses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let results = ops
        .iter()
        .zip(responses.iter().chain(std::iter::repeat(&Value::Null)))
        .map(|(op, response)| match op {
            Op::Range(_) => {
                OpResult::Range(kvs(response.get("response_range").unwrap_or(&Value::Null)))
            }
            Op::Put { .. } => OpResult::Put,
            Op::Delete { .. } => OpResult::Delete(
                response
                    .get("response_delete_range")
                    .map_or(0, |d| int(d, "deleted")),
            ),
        })
        .collect();
    TxnResult {
        revision: revision(answer),
        succeeded,
        results,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_at_its_last_byte_plus_one() {
        assert_eq!(prefix_end("/lock/"), b"/lock0".to_vec());
        assert_eq!(prefix_end("a\u{7f}"), b"a\x80".to_vec());
    }

    #[test]
    fn a_transaction_reads_back_from_the_gateways_json() {
        let txn = Txn {
            compare: vec![Compare::absent("/l/a")],
            success: vec![
                Op::Put {
                    key: "/l/a".into(),
                    value: String::new(),
                    lease: 7,
                },
                Op::Range(Range::first_created("/l/")),
            ],
            failure: vec![],
        };
        let request = txn_json(&txn);
        assert_eq!(request["compare"][0]["target"], "CREATE");
        assert_eq!(request["compare"][0]["create_revision"], "0");
        assert_eq!(request["success"][0]["request_put"]["lease"], "7");
        assert_eq!(request["success"][1]["request_range"]["limit"], "1");
        let answer: Value = serde_json::from_str(
            r#"{"header":{"revision":"2"},"succeeded":true,"responses":[{"response_put":{"header":{"revision":"2"}}},{"response_range":{"header":{"revision":"2"},"kvs":[{"key":"L2wvYQ==","create_revision":"2","mod_revision":"2","version":"1","lease":"7"}],"count":"1"}}]}"#,
        )
        .unwrap();
        let result = txn_result(&answer, &txn);
        assert_eq!(result.revision, 2);
        assert!(result.succeeded);
        let OpResult::Range(kvs) = &result.results[1] else {
            panic!("{result:?}")
        };
        assert_eq!(kvs[0].key, "/l/a");
        assert_eq!((kvs[0].create_revision, kvs[0].lease), (2, 7));
    }
}
