//! Store URL parsing: a configuration or a clear error for any string.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memgpt_backends::StoreConfig;

fuzz_target!(|data: &[u8]| {
    let url = String::from_utf8_lossy(data);
    let _ = StoreConfig::from_url(&url);
});
