//! DataFrames and figures of the analyses of [`crate::results`] that notebook 11 shows, each a
//! rendering of one typed result: the seeds present ([`seeds_frame`]), the RoPE scaling
//! factors ([`factors_frame`]), the runs' plateau ([`plateau_frame`]), the validation curves
//! as bands ([`validation_bands`]), a [`AtLength`] comparison ([`at_length_frame`]), where each
//! model breaks ([`breaks_frame`]), a reproduction ([`reproduction_frame`]), how far back
//! attention looks ([`far_mass_frame`]) and an attention map ([`attention_figure`]).

use ndarray::Array2;
use polars::prelude::{Column, DataFrame, NamedFrom, Series};

use super::columns::Columns;
use super::display::Figure;
use super::figures::{heatmap, BandSeries};
use crate::lm::config::SweepConfig;
use crate::results::{
    planned_seeds, seed_summaries, with_seed_count, AtLength, Break, BudgetEffect, CurvePoint,
    Mode, ModelKey, Plateau, Reproduction, ResultRow,
};
use crate::{Error, Result};

fn frame(columns: Vec<Column>) -> Result<DataFrame> {
    DataFrame::new_infer_height(columns).map_err(|e| Error::Io(e.to_string()))
}

/// A text column per entry of `header`, holding `cells` (a row per inner vector).
///
/// # Errors
/// [`Error::Io`] if polars refuses the columns (rows of another length than the header).
pub fn text_frame(header: &[String], cells: &[Vec<String>]) -> Result<DataFrame> {
    let columns = header
        .iter()
        .enumerate()
        .map(|(j, name)| {
            let values: Vec<&str> = cells
                .iter()
                .map(|row| row.get(j).map_or("", String::as_str))
                .collect();
            Series::new(name.as_str().into(), values).into()
        })
        .collect();
    frame(columns)
}

/// Every model of the rows ([`crate::results::models_with_seeds`]) with `seeds present`
/// (`0, 1, 2`) and `of planned` (`3 of 3`: the seeds the `record` plans for that model,
/// [`crate::results::planned_seeds`]).
///
/// # Errors
/// [`Error::Io`] if polars refuses the columns.
pub fn seeds_frame(rows: &[ResultRow], record: &SweepConfig) -> Result<DataFrame> {
    let models = crate::results::models_with_seeds(rows);
    let list = |s: &[u64]| s.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    frame(vec![
        Series::new(
            "model".into(),
            models.iter().map(|m| m.0.label()).collect::<Vec<_>>(),
        )
        .into(),
        Series::new(
            "seeds present".into(),
            models.iter().map(|m| list(&m.1)).collect::<Vec<_>>(),
        )
        .into(),
        Series::new(
            "of planned".into(),
            models
                .iter()
                .map(|m| format!("{} of {}", m.1.len(), planned_seeds(record, &m.0).len()))
                .collect::<Vec<_>>(),
        )
        .into(),
    ])
}

/// The RoPE scaling factor of every model but the base ones in `mode`, a column
/// `factor at L` per length (empty where a model has no factor).
///
/// # Errors
/// As [`seed_summaries`] (a factor that differs between seeds included).
pub fn factors_frame(rows: &[ResultRow], mode: Mode) -> Result<DataFrame> {
    let in_mode: Vec<ResultRow> = rows
        .iter()
        .filter(|r| r.mode == mode && !r.key().is_base())
        .cloned()
        .collect();
    let summaries = seed_summaries(&in_mode)?;
    let mut models: Vec<ModelKey> = Vec::new();
    let mut lengths: Vec<usize> = Vec::new();
    for s in &summaries {
        if !models.contains(&s.key()) {
            models.push(s.key());
        }
        if !lengths.contains(&s.eval_len) {
            lengths.push(s.eval_len);
        }
    }
    lengths.sort_unstable();
    let mut columns: Vec<Column> = vec![Series::new(
        "model".into(),
        models.iter().map(ModelKey::label).collect::<Vec<_>>(),
    )
    .into()];
    for l in lengths {
        let values: Vec<Option<f64>> = models
            .iter()
            .map(|m| {
                summaries
                    .iter()
                    .find(|s| s.key() == *m && s.eval_len == l)
                    .and_then(|s| s.scaling_factor)
            })
            .collect();
        columns.push(Series::new(format!("factor at {l}").as_str().into(), values).into());
    }
    frame(columns)
}

/// A row per run: `model`, `seed`, `final step`, `final validation loss (nats/byte)`,
/// `80% point (step)`, `gained over the last 20% (nats/byte)` and `on its plateau` (`yes`,
/// `no`, or `–` without a validation point that early; [`Plateau::reached`]).
///
/// # Errors
/// [`Error::Io`] if polars refuses the columns.
pub fn plateau_frame(plateaus: &[Plateau]) -> Result<DataFrame> {
    let c = Columns(plateaus);
    frame(vec![
        c.text("model", |p| p.model.label()),
        c.column("seed", |p| p.seed),
        c.count("final step", |p| p.last_step),
        c.column("final validation loss (nats/byte)", |p| Some(p.final_loss)),
        c.column("80% point (step)", |p| p.from.map(|f| f.0 as f64)),
        c.column("gained over the last 20% (nats/byte)", Plateau::gain),
        c.text("on its plateau", |p| {
            match p.reached() {
                Some(true) => "yes",
                Some(false) => "no",
                None => "–",
            }
            .into()
        }),
    ])
}

/// The validation curves over seeds as one band per model, for
/// [`super::lines_with_bands`]: x in MB of training text (a fine-tune's counted from
/// `finetune_offset` bytes, the budget of the run it starts from), the mean, and the lowest
/// and highest seed; each named with its seed count when below the seeds the `record` plans
/// for it ([`crate::results::planned_seeds`]).
pub fn validation_bands(
    points: &[CurvePoint],
    record: &SweepConfig,
    finetune_offset: f64,
) -> Vec<BandSeries> {
    let mut models: Vec<&ModelKey> = Vec::new();
    for p in points {
        if !models.contains(&&p.model) {
            models.push(&p.model);
        }
    }
    models
        .into_iter()
        .map(|model| {
            let at: Vec<&CurvePoint> = points.iter().filter(|p| p.model == *model).collect();
            let offset = if model.is_finetune() {
                finetune_offset
            } else {
                0.0
            };
            let seeds = at.iter().map(|p| p.seeds).min().unwrap_or(0);
            let pick = |f: fn(&CurvePoint) -> f64| at.iter().map(|p| f(p)).collect::<Vec<f64>>();
            (
                with_seed_count(&model.label(), seeds, planned_seeds(record, model).len()),
                at.iter().map(|p| (offset + p.bytes as f64) / 1e6).collect(),
                pick(|p| p.mean),
                pick(|p| p.min),
                pick(|p| p.max),
            )
        })
        .collect()
}

/// The budget controls against their schemes ([`crate::results::budget_effects`]): each
/// control's change from the shortest length to the longest, its scheme's as trained, their
/// difference with its uncertainty over seeds and over the text, the Holm-adjusted $p$ and
/// the verdict (`moves up`: the change is larger with more training).
///
/// # Errors
/// [`Error::Io`] if polars refuses the columns.
pub fn budget_frame(effects: &[BudgetEffect]) -> Result<DataFrame> {
    let c = Columns(effects);
    frame(vec![
        c.text("model", |e| e.model.label()),
        c.count("seeds", |e| e.vs_base.comparison.n_seeds),
        c.number("change", |e| e.change.comparison.mean),
        c.number("change as trained", |e| {
            e.change.comparison.mean - e.vs_base.comparison.mean
        }),
        c.number("difference", |e| e.vs_base.comparison.mean),
        c.seed_se(|e| &e.vs_base),
        c.number("se text", |e| e.vs_base.comparison.text.se),
        c.p_holm(|e| &e.vs_base),
        c.verdict("verdict", |e| &e.vs_base, ["moves up", "moves down"]),
    ])
}

/// An [`AtLength`] comparison as a DataFrame: [`AtLength::header`] over [`AtLength::cells`].
///
/// # Errors
/// [`Error::Io`] if polars refuses the columns.
pub fn at_length_frame(at: &AtLength) -> Result<DataFrame> {
    text_frame(&at.header(), &at.cells())
}

/// Where each model breaks, for a sweep trained at `train_len`: `model`, `seeds`, the loss of
/// the last trained bin and of the last bin, `breaks at byte` and `as a multiple of L_train`
/// (empty when it does not break).
///
/// # Errors
/// [`Error::Io`] if polars refuses the columns.
pub fn breaks_frame(breaks: &[Break], train_len: usize, bin: usize) -> Result<DataFrame> {
    let c = Columns(breaks);
    let plateau = format!("loss at [{}, {train_len})", train_len.saturating_sub(bin));
    frame(vec![
        c.text("model", |b| b.model.label()),
        c.count("seeds", |b| b.seeds),
        c.number(&plateau, |b| b.plateau),
        c.number("loss at the last bin", |b| b.last),
        c.column("breaks at byte", |b| b.at.map(|a| a as u64)),
        c.column(&format!("as a multiple of {train_len}"), |b| {
            b.at.map(|a| a as f64 / train_len as f64)
        }),
    ])
}

/// A reproduction side by side: `length`, `shipped` and `live` rows as printed (nats, se,
/// bits, ppl, bytes).
///
/// # Errors
/// [`Error::Io`] if polars refuses the columns.
pub fn reproduction_frame(r: &Reproduction) -> Result<DataFrame> {
    frame(vec![
        Series::new(
            "length".into(),
            r.lengths.iter().map(|&l| l as u64).collect::<Vec<_>>(),
        )
        .into(),
        Series::new(
            "shipped: nats, se, bits, ppl, bytes".into(),
            r.shipped.clone(),
        )
        .into(),
        Series::new("live: nats, se, bits, ppl, bytes".into(), r.live.clone()).into(),
    ])
}

/// How far back each model's last query block looks: a row per `(model, map)` of `maps`
/// with `scheme` and the attention mass on keys more than `back` blocks of `block` bytes back
/// ([`crate::results::far_mass`]).
///
/// # Errors
/// [`Error::Io`] if polars refuses the columns.
pub fn far_mass_frame(
    maps: &[(String, Array2<f64>)],
    back: usize,
    block: usize,
) -> Result<DataFrame> {
    let title = format!(
        "attention of the last {block} queries on keys > {} bytes back (last layer, head mean)",
        back * block
    );
    let c = Columns(maps);
    frame(vec![
        c.text("scheme", |m| m.0.clone()),
        c.number(&title, |m| crate::results::far_mass(&m.1, back)),
    ])
}

/// A pooled attention map (`[blocks, blocks]`, [`crate::results::last_layer_map`]) of
/// `model` as a heatmap of $\log_{10}(A_{QK} + 10^{-6})$, blocks of `block` bytes.
///
/// # Errors
/// As [`super::Heatmap::figure`].
pub fn attention_figure(
    model: &str,
    map: &Array2<f64>,
    length: usize,
    block: usize,
) -> Result<Figure> {
    let log_map = map.mapv(|v| (v + 1e-6).log10());
    heatmap(&log_map)
        .title(format!(
            "{model}: attention at {length} bytes, last layer (log10 of block mass)"
        ))
        .x(format!("key block ({block} bytes each)"))
        .y(format!("query block ({block} bytes each)"))
        .colorbar("log10 attention mass")
        .figure()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notebook::results::{column_f64, column_str};
    use crate::results::{CurvePoint, Scheme};

    fn row(variant: &str, len: usize, seed: u64, factor: Option<f64>) -> ResultRow {
        let mut r = ResultRow::example(Scheme::Rope, variant, len, seed, 1.5);
        r.scaling_factor = factor;
        r
    }

    #[test]
    fn seeds_and_factors_have_a_row_per_model() {
        let rows = vec![
            row("base", 128, 0, None),
            row("base", 128, 2, None),
            row("ntk", 128, 0, Some(1.0)),
            row("ntk", 256, 0, Some(2.0)),
        ];
        let record = SweepConfig {
            seeds: vec![0, 1, 2],
            ..SweepConfig::default()
        };
        let seeds = seeds_frame(&rows, &record).unwrap();
        assert_eq!(column_str(&seeds, "model").unwrap(), ["rope", "rope/ntk"]);
        assert_eq!(column_str(&seeds, "seeds present").unwrap(), ["0, 2", "0"]);
        assert_eq!(
            column_str(&seeds, "of planned").unwrap(),
            ["2 of 3", "1 of 3"]
        );
        let factors = factors_frame(&rows, Mode::Nonoverlap).unwrap();
        assert_eq!(column_str(&factors, "model").unwrap(), ["rope/ntk"]);
        assert_eq!(column_f64(&factors, "factor at 256").unwrap(), [2.0]);
    }

    #[test]
    fn plateau_and_band_frames_keep_each_run() {
        let run = |from| Plateau {
            model: ModelKey::new(Scheme::Rope, "ft-yarn"),
            seed: 1,
            last_step: 100,
            final_loss: 1.5,
            from,
        };
        // no earlier point; 0.005 gained (on the plateau); 0.02 gained (still improving)
        let runs = [run(None), run(Some((80, 1.505))), run(Some((80, 1.52)))];
        let df = plateau_frame(&runs).unwrap();
        assert_eq!(
            column_str(&df, "on its plateau").unwrap(),
            ["–", "yes", "no"]
        );
        assert_eq!(
            df.column("gained over the last 20% (nats/byte)")
                .unwrap()
                .null_count(),
            1
        );
        let point = |variant: &str, seeds| CurvePoint {
            model: ModelKey::new(Scheme::Rope, variant),
            step: 100,
            bytes: 1_000_000,
            seeds,
            mean: 2.0,
            min: 1.9,
            max: 2.1,
        };
        let record = SweepConfig::default(); // fine-tunes at 3 seeds
        let bands = validation_bands(&[point("base", 5), point("ft-yarn", 1)], &record, 8e6);
        assert_eq!(bands[0].0, "rope");
        assert_eq!(bands[1].0, "rope/ft-yarn (1 of 3 seeds)");
        assert_eq!(bands[1].1, [9.0]);
        assert_eq!((bands[0].3[0], bands[0].4[0]), (1.9, 2.1));
    }

    /// A budget control's row: its change, its scheme's (the difference subtracted back), the
    /// difference with both uncertainties and the verdict in words.
    #[test]
    fn budget_frame_keeps_each_control() {
        use crate::results::{BudgetEffect, Comparison, Tested, TextUncertainty};
        let comparison = |mean: f64, seeds: usize| Comparison {
            mean,
            per_seed: Vec::new(),
            se_seeds: 0.1,
            df: seeds - 1,
            t: mean / 0.1,
            p: (seeds > 1).then_some(0.01),
            text: TextUncertainty {
                se: 0.02,
                interval: (0.0, 0.0),
                resamples: 2000,
            },
            n_windows: 243,
            n_seeds: seeds,
        };
        let effect = |variant: &str, change: f64, diff: f64, p_holm: Option<f64>| BudgetEffect {
            model: ModelKey::new(Scheme::Nope, variant),
            base: ModelKey::base(Scheme::Nope),
            change: Tested {
                comparison: comparison(change, 3),
                p_holm,
            },
            vs_base: Tested {
                comparison: comparison(diff, if p_holm.is_some() { 3 } else { 1 }),
                p_holm,
            },
        };
        let df = budget_frame(&[
            effect("budget-x2", 1.5, -0.5, Some(0.01)),
            effect("budget-x4", 2.0, 0.1, None),
        ])
        .unwrap();
        assert_eq!(column_f64(&df, "change as trained").unwrap(), [2.0, 1.9]);
        assert_eq!(column_f64(&df, "se text").unwrap(), [0.02, 0.02]);
        assert_eq!(
            column_str(&df, "verdict").unwrap(),
            ["moves down", "one seed"]
        );
        assert!(column_f64(&df, "se seeds").unwrap()[1].is_nan());
    }

    #[test]
    fn breaks_and_reproductions_render() {
        let b = Break {
            model: ModelKey::base(Scheme::Nope),
            seeds: 2,
            plateau: 1.5,
            last: 3.0,
            at: Some(192),
        };
        let df = breaks_frame(&[b], 128, 64).unwrap();
        assert_eq!(column_f64(&df, "as a multiple of 128").unwrap(), [1.5]);
        assert_eq!(column_f64(&df, "loss at [64, 128)").unwrap(), [1.5]);
        let r = Reproduction {
            lengths: vec![128],
            shipped: vec!["a".into()],
            live: vec!["a".into()],
            differing: vec![],
            largest: 0.0,
        };
        assert_eq!(reproduction_frame(&r).unwrap().height(), 1);
        let map = Array2::from_elem((2, 2), 0.5);
        assert!(attention_figure("rope", &map, 64, 32).is_ok());
        // a 3-block map, last row 0.1, 0.5, 0.4: one block back leaves block 0
        let mut causal = Array2::<f64>::zeros((3, 3));
        causal.row_mut(2).assign(&ndarray::arr1(&[0.1, 0.5, 0.4]));
        let far = far_mass_frame(&[("nope".into(), causal)], 1, 32).unwrap();
        let name =
            "attention of the last 32 queries on keys > 32 bytes back (last layer, head mean)";
        assert!((column_f64(&far, name).unwrap()[0] - 0.1).abs() < 1e-12);
        assert!(text_frame(&["a".into()], &[vec!["x".into()]]).is_ok());
    }
}
