//! What the figure tests share: a scratch folder, PNG decoding and pixel probes.

use std::path::{Path, PathBuf};

use plotters::style::RGBColor;

/// A fresh directory for one test; removed on drop unless `ONO_KEEP_TEST_PLOTS` is set, to
/// let a person look at the figures.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ono-plot-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub(crate) fn entries(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("ONO_KEEP_TEST_PLOTS").is_some() {
            eprintln!("kept test figures in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

pub(crate) fn decode_png(path: &Path) -> image::RgbImage {
    let bytes = std::fs::read(path).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} lacks the PNG signature",
        path.display()
    );
    image::load_from_memory_with_format(&bytes, image::ImageFormat::Png)
        .unwrap()
        .to_rgb8()
}

pub(crate) fn pixel(img: &image::RgbImage, (x, y): (i32, i32)) -> RGBColor {
    let p = img.get_pixel(x as u32, y as u32);
    RGBColor(p[0], p[1], p[2])
}
