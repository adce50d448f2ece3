//! Loss and accuracy curves of a [`TrainingHistory`] as PNG or SVG, drawn with `plotters`.
//!
//! Text is rendered with `ab_glyph` from an embedded DejaVu Sans (`assets/fonts/`, Bitstream
//! Vera license next to it), so drawing needs no system fontconfig or FreeType. PNGs are drawn
//! into an RGB buffer and encoded with the `png` crate.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{Error, Result};

use super::history::TrainingHistory;

static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// Image size in pixels (SVG: user units).
const SIZE: (u32, u32) = (1200, 480);

/// The file format of [`plot_history`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlotFormat {
    /// A PNG image.
    Png,
    /// An SVG drawing.
    Svg,
}

impl PlotFormat {
    /// The format a path's extension names (`.png`, `.svg`, any case).
    pub fn from_path(path: &Path) -> Result<Self> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("png") => Ok(PlotFormat::Png),
            Some("svg") => Ok(PlotFormat::Svg),
            _ => Err(Error::InvalidArgument(format!(
                "{}: a plot is written as .png or .svg",
                path.display()
            ))),
        }
    }
}

fn register_font() -> Result<()> {
    static ONCE: Once = Once::new();
    let mut ok = true;
    ONCE.call_once(|| {
        ok = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok();
    });
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(
            "the embedded plot font could not be read".into(),
        ))
    }
}

fn draw_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Format {
        path: path.display().to_string(),
        reason: format!("drawing the plot failed: {e}"),
    }
}

/// Draws `history`'s loss curves (train and validation) and, for classification, its accuracy
/// curves side by side into `path`, titled `title`, as PNG or SVG by the extension.
pub fn plot_history(history: &TrainingHistory, title: &str, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let format = PlotFormat::from_path(path)?;
    if history.epochs.is_empty() {
        return Err(Error::InvalidArgument(
            "a history without epochs has no curves to plot".into(),
        ));
    }
    register_font()?;
    match format {
        PlotFormat::Svg => {
            let root = SVGBackend::new(path, SIZE).into_drawing_area();
            draw(history, title, &root).map_err(|e| draw_error(path, e))?;
            root.present().map_err(|e| draw_error(path, e))
        }
        PlotFormat::Png => {
            let mut rgb = vec![0u8; (SIZE.0 * SIZE.1 * 3) as usize];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area();
                draw(history, title, &root).map_err(|e| draw_error(path, e))?;
                root.present().map_err(|e| draw_error(path, e))?;
            }
            write_png(path, &rgb)
        }
    }
}

fn write_png(path: &Path, rgb: &[u8]) -> Result<()> {
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), SIZE.0, SIZE.1);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header().map_err(|e| draw_error(path, e))?;
    writer
        .write_image_data(rgb)
        .map_err(|e| draw_error(path, e))?;
    writer.finish().map_err(|e| draw_error(path, e))
}

type Series = Vec<(f32, f32)>;

/// `(train, validation)` points of one metric; empty where not recorded.
fn series(
    history: &TrainingHistory,
    pick: impl Fn(usize) -> (Option<f32>, Option<f32>),
) -> (Series, Series) {
    let mut train = Vec::new();
    let mut val = Vec::new();
    for (i, e) in history.epochs.iter().enumerate() {
        let (t, v) = pick(i);
        if let Some(t) = t.filter(|x| x.is_finite()) {
            train.push((e.epoch as f32, t));
        }
        if let Some(v) = v.filter(|x| x.is_finite()) {
            val.push((e.epoch as f32, v));
        }
    }
    (train, val)
}

fn draw<DB: DrawingBackend>(
    history: &TrainingHistory,
    title: &str,
    root: &DrawingArea<DB, Shift>,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 24))?;
    let e = &history.epochs;
    let losses = series(history, |i| (Some(e[i].loss), e[i].val_loss));
    let accuracy = series(history, |i| (e[i].accuracy, e[i].val_accuracy));
    let has_accuracy = !accuracy.0.is_empty() || !accuracy.1.is_empty();
    let panels = if has_accuracy {
        root.split_evenly((1, 2))
    } else {
        vec![root]
    };
    panel(&panels[0], "loss", &losses, history)?;
    if has_accuracy {
        panel(&panels[1], "accuracy", &accuracy, history)?;
    }
    Ok(())
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    metric: &str,
    (train, val): &(Series, Series),
    history: &TrainingHistory,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let first = history.epochs.first().map_or(1, |e| e.epoch) as f32;
    let last = history.epochs.last().map_or(1, |e| e.epoch) as f32;
    let ys = train.iter().chain(val).map(|p| p.1);
    let (lo, hi) = ys.fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), y| {
        (l.min(y), h.max(y))
    });
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    let pad = ((hi - lo) * 0.08).max(1e-3);
    let x_hi = if last > first { last } else { first + 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(metric, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(first..x_hi, (lo - pad)..(hi + pad))?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc(metric)
        .label_style(("sans-serif", 14))
        .draw()?;
    let mut drew = false;
    for (points, name, color) in [(train, "train", BLUE), (val, "validation", RED)] {
        if points.is_empty() {
            continue;
        }
        drew = true;
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    if drew {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()?;
    }
    Ok(())
}

impl TrainingHistory {
    /// [`plot_history`]: loss and accuracy curves to `path` (`.png` or `.svg`).
    pub fn plot(&self, title: &str, path: impl AsRef<Path>) -> Result<()> {
        plot_history(self, title, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_follows_the_extension() {
        assert_eq!(
            PlotFormat::from_path(Path::new("a/b.PNG")).unwrap(),
            PlotFormat::Png
        );
        assert_eq!(
            PlotFormat::from_path(Path::new("c.svg")).unwrap(),
            PlotFormat::Svg
        );
        assert!(PlotFormat::from_path(Path::new("c.jpg")).is_err());
    }
}
