//! `/metrics` for Prometheus, for both agents: `serve` answers `GET /metrics` with what a
//! `Render` gives (OpenMetrics text), from one background thread (`tiny_http`); `parse_listen`
//! reads the address it binds.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// The metrics address: `HOST:PORT`, or a bare `PORT` / `:PORT`, which binds 127.0.0.1 (the
/// endpoint is local unless the operator names another address).
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let port = text.strip_prefix(':').unwrap_or(text);
    if let Ok(p) = port.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], p)));
    }
    text.parse()
        .map_err(|_| format!("{text:?} is not an address like 127.0.0.1:9464 or a port"))
}

/// What `serve` serves: the OpenMetrics text of the values now.
pub trait Render {
    fn render(&self) -> String;
}

/// Binds `addr` and serves `GET /metrics` from a background thread. Binding errors are returned
/// (an operator asked for the endpoint; silently not having it would mislead).
pub fn serve<M: Render + Send + 'static>(
    addr: SocketAddr,
    metrics: Arc<Mutex<M>>,
) -> Result<SocketAddr, String> {
    let server =
        tiny_http::Server::http(addr).map_err(|e| format!("metrics.listen {addr}: {e}"))?;
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| format!("metrics.listen {addr}: not an IP address"))?;
    let content_type = tiny_http::Header::from_bytes(
        "Content-Type",
        "application/openmetrics-text; version=1.0.0; charset=utf-8",
    )
    .expect("a valid header");
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for request in server.incoming_requests() {
                let response = if request.url() == "/metrics" {
                    let body = metrics.lock().map(|m| m.render()).unwrap_or_default();
                    tiny_http::Response::from_string(body).with_header(content_type.clone())
                } else {
                    tiny_http::Response::from_string("try /metrics\n").with_status_code(404)
                };
                let _ = request.respond(response);
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn metrics_listen_defaults_to_loopback() {
        assert_eq!(parse_listen("9464").unwrap().to_string(), "127.0.0.1:9464");
        assert_eq!(parse_listen(":9464").unwrap().to_string(), "127.0.0.1:9464");
        assert_eq!(
            parse_listen("0.0.0.0:9464").unwrap().to_string(),
            "0.0.0.0:9464"
        );
        assert!(parse_listen("localhost").is_err());
    }

    struct Fixed(&'static str);

    impl Render for Fixed {
        fn render(&self) -> String {
            self.0.to_string()
        }
    }

    #[test]
    fn serves_what_it_renders_on_loopback() {
        let m = Arc::new(Mutex::new(Fixed("x_total 4\n# EOF\n")));
        let addr = serve("127.0.0.1:0".parse().unwrap(), m).unwrap();
        let get = |path: &str| {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            write!(c, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
            let mut out = String::new();
            c.read_to_string(&mut out).unwrap();
            out
        };
        let out = get("/metrics");
        assert!(out.starts_with("HTTP/1.0 200 OK"), "{out}");
        assert!(out.contains("application/openmetrics-text"), "{out}");
        assert!(out.ends_with("x_total 4\n# EOF\n"), "{out}");
        assert!(get("/").starts_with("HTTP/1.0 404"));
    }
}
