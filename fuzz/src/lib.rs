//! What the fuzz targets share.

use std::sync::OnceLock;

use tokio::runtime::Runtime;

/// One single-threaded runtime per target process, built on first use: building one per
/// input would cost more than most inputs.
pub fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    })
}
