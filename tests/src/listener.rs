//! A TCP listener on 127.0.0.1 that only counts who connects to it and
//! what they sent first: the stand-in for a server of an attacker's, which
//! must see no connection at all when a credential may not go there.
//! Stopped on drop.

use std::io::Read;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The listener; stopped on drop.
#[derive(Debug)]
pub struct Listener {
    port: u16,
    stop: Arc<AtomicBool>,
    first_bytes: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Listener {
    /// Listens on a free port of 127.0.0.1.
    pub fn start() -> Listener {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port on 127.0.0.1");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let port = listener.local_addr().expect("bound").port();
        let stop = Arc::new(AtomicBool::new(false));
        let first_bytes = Arc::new(Mutex::new(Vec::new()));
        let (s, seen) = (stop.clone(), first_bytes.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        let _ = stream.set_nonblocking(false);
                        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
                        let mut buffer = vec![0; 4096];
                        let read = stream.read(&mut buffer).unwrap_or(0);
                        buffer.truncate(read);
                        seen.lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push(buffer);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Listener {
            port,
            stop,
            first_bytes,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// How many connections were made to it.
    pub fn connections(&self) -> usize {
        self.first_bytes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}
