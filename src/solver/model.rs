//! A solver-neutral linear model: columns with bounds and integrality, rows
//! stored sparse by row, and a linear objective (always minimised).
//!
//! Formulations are written once against this struct and each backend
//! translates it in one pass; that keeps the MILP identical across solvers,
//! which is what makes cross-solver agreement a meaningful test.

/// Index of a column in a [`Model`].
pub type Col = usize;

#[derive(Debug, Clone, Default)]
pub struct Model {
    pub col_lower: Vec<f64>,
    pub col_upper: Vec<f64>,
    pub col_cost: Vec<f64>,
    pub integer: Vec<bool>,
    pub row_lower: Vec<f64>,
    pub row_upper: Vec<f64>,
    /// CSR: row r's entries are `row_start[r]..row_start[r + 1]`.
    pub row_start: Vec<usize>,
    pub row_index: Vec<u32>,
    pub row_value: Vec<f64>,
}

impl Model {
    pub fn new() -> Model {
        Model {
            row_start: vec![0],
            ..Model::default()
        }
    }

    pub fn num_cols(&self) -> usize {
        self.col_cost.len()
    }

    pub fn num_rows(&self) -> usize {
        self.row_lower.len()
    }

    pub fn num_nonzeros(&self) -> usize {
        self.row_value.len()
    }

    pub fn add_col(&mut self, lower: f64, upper: f64, cost: f64, integer: bool) -> Col {
        self.col_lower.push(lower);
        self.col_upper.push(upper);
        self.col_cost.push(cost);
        self.integer.push(integer);
        self.col_cost.len() - 1
    }

    /// Adds `lower <= Σ coef·x[col] <= upper`. Zero coefficients are
    /// dropped; a column may appear once per row.
    pub fn add_row(&mut self, lower: f64, upper: f64, entries: &[(Col, f64)]) {
        for &(c, v) in entries {
            debug_assert!(c < self.num_cols());
            if v != 0.0 {
                self.row_index.push(c as u32);
                self.row_value.push(v);
            }
        }
        self.row_lower.push(lower);
        self.row_upper.push(upper);
        self.row_start.push(self.row_index.len());
    }

    /// Adds the covering row `Σ m·x ≥ need`, scaled so that its largest
    /// coefficient is one: bytes run to 10^10 and times to 10^-3 in the
    /// same model, and rows of order one keep HiGHS's absolute tolerances
    /// meaningful. (Scaling by the need instead breaks on a stage that lacks
    /// a few bytes: its coefficients reach 10^9, and HiGHS then reported
    /// bounds above a known plan on MobileNet. Unscaled, the recompute cover
    /// program ended in a solve error on a random DAG of gigabyte values.)
    ///
    /// Every positive coefficient is also capped at what the row can ever
    /// ask, the need plus every negative term at its largest: the columns
    /// with positive coefficients are whole (0 or 1 in every plan's point),
    /// so one of them at 1 with a coefficient past the cap covers the row
    /// anyway, and the cap only takes away fractional covers. A stage that
    /// lacks 40 MB could otherwise be covered by 1.2% of a 3.3 GB value
    /// claimed absent, with 1.2% of its copy's deadline (VGG16 on the
    /// GH200).
    pub fn add_covering_row(&mut self, row: &[(Col, f64)], need: f64) {
        let most = need + row.iter().map(|&(_, m)| (-m).max(0.0)).sum::<f64>();
        let capped: Vec<(Col, f64)> = row.iter().map(|&(c, m)| (c, m.min(most))).collect();
        let top = capped.iter().map(|&(_, m)| m).fold(0.0, f64::max);
        let k = if top > 0.0 { top } else { need };
        let scaled: Vec<(Col, f64)> = capped.iter().map(|&(c, m)| (c, m / k)).collect();
        self.add_row(need / k, f64::INFINITY, &scaled);
    }

    /// The model with the rows `rows` only, in that order: a relaxation,
    /// for row generation.
    pub fn select_rows(&self, rows: impl Iterator<Item = usize>) -> Model {
        let mut m = Model {
            col_lower: self.col_lower.clone(),
            col_upper: self.col_upper.clone(),
            col_cost: self.col_cost.clone(),
            integer: self.integer.clone(),
            ..Model::new()
        };
        for r in rows {
            m.push_row_of(self, r);
        }
        m
    }

    /// Appends row `r` of `other`, a model with the same columns.
    pub fn push_row_of(&mut self, other: &Model, r: usize) {
        let span = other.row_start[r]..other.row_start[r + 1];
        self.row_index
            .extend_from_slice(&other.row_index[span.clone()]);
        self.row_value.extend_from_slice(&other.row_value[span]);
        self.row_lower.push(other.row_lower[r]);
        self.row_upper.push(other.row_upper[r]);
        self.row_start.push(self.row_index.len());
    }

    /// Row `r`'s activity at `x`.
    pub fn row_activity(&self, r: usize, x: &[f64]) -> f64 {
        (self.row_start[r]..self.row_start[r + 1])
            .map(|p| self.row_value[p] * x[self.row_index[p] as usize])
            .sum()
    }

    /// The same model with every integrality requirement dropped.
    pub fn relaxed(&self) -> Model {
        let mut m = self.clone();
        m.integer.iter_mut().for_each(|b| *b = false);
        m
    }

    pub fn is_mip(&self) -> bool {
        self.integer.iter().any(|&b| b)
    }

    /// The matrix by column (CSC), row indices ascending within a column,
    /// as CBC's loader requires.
    pub fn to_csc(&self) -> (Vec<i32>, Vec<i32>, Vec<f64>) {
        let n = self.num_cols();
        let mut count = vec![0usize; n + 1];
        for &c in &self.row_index {
            count[c as usize + 1] += 1;
        }
        for j in 0..n {
            count[j + 1] += count[j];
        }
        let start: Vec<i32> = count.iter().map(|&x| x as i32).collect();
        let mut next = count;
        let mut index = vec![0i32; self.row_index.len()];
        let mut value = vec![0f64; self.row_index.len()];
        for r in 0..self.num_rows() {
            for p in self.row_start[r]..self.row_start[r + 1] {
                let c = self.row_index[p] as usize;
                index[next[c]] = r as i32;
                value[next[c]] = self.row_value[p];
                next[c] += 1;
            }
        }
        (start, index, value)
    }

    pub fn objective(&self, x: &[f64]) -> f64 {
        self.col_cost.iter().zip(x).map(|(c, v)| c * v).sum()
    }

    /// The largest violation of any bound, row or integrality requirement
    /// by `x`. Backends whose status flags are unreliable use it to decide
    /// whether a returned vector is a solution at all.
    pub fn max_violation(&self, x: &[f64]) -> f64 {
        if x.len() != self.num_cols() {
            return f64::INFINITY;
        }
        let mut worst = 0f64;
        #[allow(clippy::needless_range_loop)] // four parallel arrays
        for j in 0..x.len() {
            worst = worst
                .max(self.col_lower[j] - x[j])
                .max(x[j] - self.col_upper[j]);
            if self.integer[j] {
                worst = worst.max((x[j] - x[j].round()).abs());
            }
        }
        for r in 0..self.num_rows() {
            let a = self.row_activity(r, x);
            worst = worst.max(self.row_lower[r] - a).max(a - self.row_upper[r]);
        }
        worst
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csc_transposes_rows() {
        let mut m = Model::new();
        let a = m.add_col(0.0, 1.0, 1.0, true);
        let b = m.add_col(0.0, 1.0, 2.0, false);
        m.add_row(1.0, f64::INFINITY, &[(a, 1.0), (b, 3.0)]);
        m.add_row(-1.0, 1.0, &[(b, -1.0)]);
        let (s, i, v) = m.to_csc();
        assert_eq!(s, vec![0, 1, 3]);
        assert_eq!(i, vec![0, 0, 1]);
        assert_eq!(v, vec![1.0, 3.0, -1.0]);
        assert_eq!(m.max_violation(&[1.0, 0.0]), 0.0);
        assert!(m.max_violation(&[0.0, 0.2]) > 0.3);
    }
}
