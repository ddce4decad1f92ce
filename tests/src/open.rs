//! Checks of the opening products, [`Backend::row_dot_products`] and
//! [`Backend::column_dot_products`], of FRI's fold, [`Backend::fri_fold`], and of its input,
//! [`Backend::reduce_openings`], against the naive `u128 % p` references (the last solving each
//! point's linear system by Gaussian elimination), and of the refusals every backend applies before anything is issued.
//!
//! The products and the fold are optional: a backend that answers [`Error::Unsupported`] prints
//! `SKIPPED <backend>::<check>` and passes the product checks (its callers compute them on the
//! host), unless its suite runs under `REQUIRE_<PORT>=all` ([`crate::require_optional`]). The refusals come from the checked front, so every backend, one without the products
//! included, must give them.

use backend_api::{
    Backend, Error, MAX_DOT_VECTORS, MAX_EXTENSION_DEGREE, MAX_REDUCTION_POINTS, MatrixShape, ReductionCall,
    ReductionPoint, RowStride,
};

use crate::{Context as _, Gen, Outcome, ensure, ensure_live, ensure_words_eq, expect_error, reference};

/// The check's outcome when `result` says the backend does not implement the operation (a pass
/// after a `SKIPPED` line, or a failure under [`crate::require_optional`]); `None` otherwise.
fn skipped<B: Backend>(backend: &B, check: &str, result: &backend_api::Result<()>) -> Option<Outcome> {
    match result {
        Err(e) if e.is_unsupported() => Some(crate::unsupported(backend, check, e)),
        _ => None,
    }
}

/// Shapes (rows, cols) and vector counts of the product checks: one element, one row, one
/// column, odd sizes, wide rows, and every vector count up to [`MAX_DOT_VECTORS`].
const SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (1, 7, 2),
    (9, 1, 3),
    (16, 3, 2),
    (33, 17, 4),
    (64, 256, 2),
    (257, 5, MAX_DOT_VECTORS),
    (1024, 33, 1),
    (4096, 2, 2),
];

/// Row products of random matrices and coefficients (non-canonical values included) against the
/// reference, every output canonical.
///
/// # Errors
/// The first shape whose products differ.
pub fn row_dot_products_random<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("row_dot_products_random");
    let baseline = backend.memory().live;
    for &(rows, cols, k) in SHAPES {
        let shape = MatrixShape::new(rows, cols).ctx("shape")?;
        let host = g.matrix(shape.len());
        let coeffs = g.matrix(k * cols);
        let matrix = backend.upload(&host).ctx("upload")?;
        let mut out = vec![0xdead_beef; rows * k];
        let result = backend.row_dot_products(&matrix, shape, &coeffs, &mut out);
        if let Some(skip) = skipped(backend, "row_dot_products_random", &result) {
            return skip;
        }
        let what = format!("row_dot_products of {shape} with {k} vectors");
        result.ctx(&what)?;
        ensure_words_eq(&what, &reference::row_dot_products(&host, cols, &coeffs), &out)?;
        ensure_words_eq(
            format!("{what}: the matrix afterwards"),
            &host,
            &backend.download_vec(&matrix).ctx("download")?,
        )?;
    }
    ensure_live(backend, baseline, "row_dot_products_random")
}

/// Column products over every row, strided rows (a PCS's trace coset in an LDE), an offset
/// first row and a single row, against the reference, every output canonical.
///
/// # Errors
/// The first selection whose products differ.
pub fn column_dot_products_random<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("column_dot_products_random");
    let baseline = backend.memory().live;
    for &(rows, cols, k) in SHAPES {
        let shape = MatrixShape::new(rows, cols).ctx("shape")?;
        let host = g.matrix(shape.len());
        let matrix = backend.upload(&host).ctx("upload")?;
        let mut selections = vec![RowStride::all(rows), RowStride::new(rows - 1, 1, 1)];
        if rows >= 4 {
            selections.push(RowStride::new(0, 2, rows / 2));
            selections.push(RowStride::new(1, 3, (rows - 2) / 3 + 1));
        }
        for rows_read in selections {
            let weights = g.matrix(k * rows_read.count);
            let mut out = vec![0xdead_beef; k * cols];
            let result = backend.column_dot_products(&matrix, shape, rows_read, &weights, &mut out);
            if let Some(skip) = skipped(backend, "column_dot_products_random", &result) {
                return skip;
            }
            let what = format!("column_dot_products of {shape}, {rows_read}, {k} vectors");
            result.ctx(&what)?;
            let expected =
                reference::column_dot_products(&host, cols, rows_read.first, rows_read.step, rows_read.count, &weights);
            ensure_words_eq(&what, &expected, &out)?;
        }
    }
    ensure_live(backend, baseline, "column_dot_products_random")
}

/// Sums that wrap a 64-bit accumulator if reduced late: every element and coefficient `p - 1`
/// (so every product is 1) and `u64::MAX` (non-canonical, `2^32 - 2`), over 1,000 columns (a row
/// within the 1,024-element segments of the wgpu suite's segmented setup) and 5,000 rows.
///
/// # Errors
/// The first sum that differs.
pub fn dot_products_large_sums<B: Backend>(backend: &B) -> Outcome {
    let p = reference::P;
    let baseline = backend.memory().live;
    for (rows, cols) in [(3, 1000), (5000, 3)] {
        for value in [p - 1, u64::MAX] {
            let shape = MatrixShape::new(rows, cols).ctx("shape")?;
            let host = vec![value; shape.len()];
            let matrix = backend.upload(&host).ctx("upload")?;
            let coeffs = vec![value; 2 * cols];
            let mut out = vec![0; rows * 2];
            let result = backend.row_dot_products(&matrix, shape, &coeffs, &mut out);
            if let Some(skip) = skipped(backend, "dot_products_large_sums", &result) {
                return skip;
            }
            let what = format!("row_dot_products of {shape}, every value {value:#x}");
            result.ctx(&what)?;
            ensure_words_eq(&what, &reference::row_dot_products(&host, cols, &coeffs), &out)?;
            let weights = vec![value; 2 * rows];
            let mut out = vec![0; 2 * cols];
            let what = format!("column_dot_products of {shape}, every value {value:#x}");
            backend.column_dot_products(&matrix, shape, RowStride::all(rows), &weights, &mut out).ctx(&what)?;
            ensure_words_eq(&what, &reference::column_dot_products(&host, cols, 0, 1, rows, &weights), &out)?;
        }
    }
    // A sum of exactly p is 0, never p (a lazily reduced sum leaves p).
    let pair = backend.upload(&[1, p - 1]).ctx("upload")?;
    let mut out = [7u64; 1];
    let what = "row_dot_products of the row [1, p - 1] with [1, 1]";
    backend.row_dot_products(&pair, MatrixShape::new(1, 2).ctx("shape")?, &[1, 1], &mut out).ctx(what)?;
    ensure_words_eq(what, &[0], &out)?;
    let what = "column_dot_products of the column [1, p - 1] with [1, 1]";
    backend
        .column_dot_products(&pair, MatrixShape::new(2, 1).ctx("shape")?, RowStride::all(2), &[1, 1], &mut out)
        .ctx(what)?;
    ensure_words_eq(what, &[0], &out)?;
    drop(pair);
    ensure_live(backend, baseline, "dot_products_large_sums")
}

/// Which error a refused call must give.
type Expected = dyn Fn(&Error) -> bool;
/// A refused row-product call: what is wrong, the matrix, the coefficients, the output's length
/// and the error it must give.
type RowCase<'a, T> = (&'a str, &'a T, Vec<u64>, usize, &'a Expected);
/// A refused column-product call: what is wrong, the matrix, the rows, the weights' and the
/// output's lengths, and the error it must give.
type ColumnCase<'a, T> = (&'a str, &'a T, RowStride, usize, usize, &'a Expected);

/// Every refusal of the checked front, with the typed error and the output untouched, on every
/// backend (one without the products included: the front refuses first).
///
/// # Errors
/// The first call that is accepted, or refused with another error, or that wrote its output.
pub fn dot_products_errors<B: Backend>(backend: &B) -> Outcome {
    let baseline = backend.memory().live;
    let shape = MatrixShape::new(8, 3).ctx("shape")?;
    let matrix = backend.upload(&[5; 24]).ctx("upload")?;
    let short = backend.upload(&[5; 23]).ctx("upload")?;
    let length = |e: &Error| matches!(e, Error::LengthMismatch { .. });
    let invalid = |e: &Error| matches!(e, Error::InvalidArgument(_));
    let bounds = |e: &Error| matches!(e, Error::OutOfBounds { .. });
    let untouched = |what: &str, out: &[u64]| -> Outcome {
        ensure!(out.iter().all(|&x| x == 7), "{what}: a refused call wrote its output");
        Ok(())
    };

    let row_cases: Vec<RowCase<'_, B::Buffer>> = vec![
        ("a buffer that does not hold the shape", &short, vec![1; 3], 8, &length),
        ("coefficients that are not whole vectors", &matrix, vec![1; 4], 8, &length),
        ("no coefficient vector", &matrix, vec![], 0, &invalid),
        ("more vectors than MAX_DOT_VECTORS", &matrix, vec![1; 3 * (MAX_DOT_VECTORS + 1)], 8 * 9, &invalid),
        ("an output of the wrong length", &matrix, vec![1; 6], 15, &length),
    ];
    for (what, m, coeffs, out_len, pred) in row_cases {
        let mut out = vec![7; out_len];
        let what = format!("row_dot_products with {what}");
        expect_error(backend.row_dot_products(m, shape, &coeffs, &mut out), &what, pred)?;
        untouched(&what, &out)?;
    }

    let col_cases: Vec<ColumnCase<'_, B::Buffer>> = vec![
        ("a buffer that does not hold the shape", &short, RowStride::all(8), 8, 3, &length),
        ("a zero step", &matrix, RowStride::new(0, 0, 2), 2, 3, &invalid),
        ("no row", &matrix, RowStride::new(0, 1, 0), 0, 3, &invalid),
        ("a last row past the matrix", &matrix, RowStride::new(2, 2, 4), 4, 3, &bounds),
        ("a first row past the matrix", &matrix, RowStride::new(8, 1, 1), 1, 3, &bounds),
        ("a step that overflows", &matrix, RowStride::new(1, usize::MAX, 2), 2, 3, &bounds),
        ("weights that are not whole vectors", &matrix, RowStride::all(8), 9, 3, &length),
        ("more vectors than MAX_DOT_VECTORS", &matrix, RowStride::new(0, 8, 1), MAX_DOT_VECTORS + 1, 27, &invalid),
        ("an output of the wrong length", &matrix, RowStride::all(8), 16, 3, &length),
    ];
    for (what, m, rows, weights_len, out_len, pred) in col_cases {
        let mut out = vec![7; out_len];
        let what = format!("column_dot_products ({rows}) with {what}");
        expect_error(backend.column_dot_products(m, shape, rows, &vec![1; weights_len], &mut out), &what, pred)?;
        untouched(&what, &out)?;
    }
    // The boundary itself is accepted: the last row read is the matrix's last row.
    let mut out = vec![0; 3];
    let what = "column_dot_products reading rows 1, 3, 5, 7 of 8";
    let result = backend.column_dot_products(&matrix, shape, RowStride::new(1, 2, 4), &[1; 4], &mut out);
    if !result.as_ref().is_err_and(Error::is_unsupported) {
        result.ctx(what)?;
        ensure_words_eq(what, &[20, 20, 20], &out)?;
    }
    // One row read takes no step: the largest step is accepted, and no backend's arithmetic on it
    // may overflow.
    let mut out = vec![0; 3];
    let what = "column_dot_products reading row 5 of 8 with a step of 2^63";
    let result = backend.column_dot_products(&matrix, shape, RowStride::new(5, 1 << 63, 1), &[3], &mut out);
    if !result.as_ref().is_err_and(Error::is_unsupported) {
        result.ctx(what)?;
        ensure_words_eq(what, &[15, 15, 15], &out)?;
    }
    drop((matrix, short));
    ensure_live(backend, baseline, "dot_products_errors")
}

/// Folds (extension degree, folded elements): the base field and degrees 2, 3, 4 and the largest,
/// from one folded element (the pair at `1, -1`) to 4,096 (across the wgpu suite's segments).
const FOLDS: &[(usize, usize)] =
    &[(1, 1), (1, 2), (2, 1), (2, 4), (1, 64), (2, 1024), (3, 8), (4, 32), (MAX_EXTENSION_DEGREE, 16), (2, 4096)];

/// FRI folds of random vectors and challenges (non-canonical values included), with and without
/// an addend, against the reference's fold from the definition; every output canonical, the
/// input and the addend unchanged.
///
/// # Errors
/// The first fold whose output differs.
pub fn fri_fold_random<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("fri_fold_random");
    let baseline = backend.memory().live;
    for &(d, n) in FOLDS {
        let host = g.matrix(2 * n * d);
        let input = backend.upload(&host).ctx("upload")?;
        for with_addend in [false, true] {
            let beta = g.matrix(d * d);
            let addend_host = g.matrix(n * d);
            let gamma = g.matrix(d * d);
            let addend_buf = backend.upload(&addend_host).ctx("upload the addend")?;
            let mut out = backend.upload(&vec![0xdead_beef; n * d]).ctx("upload the output")?;
            let addend = with_addend.then_some((&addend_buf, &gamma[..]));
            let result = backend.fri_fold(&input, &beta, addend, &mut out);
            if let Some(skip) = skipped(backend, "fri_fold_random", &result) {
                return skip;
            }
            let what =
                format!("fri_fold of {n} elements of degree {d}{}", if with_addend { " with an addend" } else { "" });
            result.ctx(&what)?;
            let expected = reference::fri_fold(&host, &beta, with_addend.then_some((&addend_host[..], &gamma[..])));
            ensure_words_eq(&what, &expected, &backend.download_vec(&out).ctx("download")?)?;
            ensure_words_eq(
                format!("{what}: the addend afterwards"),
                &addend_host,
                &backend.download_vec(&addend_buf).ctx("download")?,
            )?;
        }
        ensure_words_eq(
            format!("fri_fold of {n} elements of degree {d}: the input afterwards"),
            &host,
            &backend.download_vec(&input).ctx("download")?,
        )?;
    }
    ensure_live(backend, baseline, "fri_fold_random")
}

/// Which fold call a refusal case makes: what is wrong, the input's, challenge's and output's
/// lengths, the addend's and its challenge's lengths, and the error it must give.
type FoldCase<'a> = (&'a str, usize, usize, usize, Option<(usize, usize)>, &'a Expected);

/// Every refusal of the fold's checked front, with the typed error and the output untouched.
///
/// # Errors
/// The first call that is accepted, or refused with another error, or that wrote its output.
pub fn fri_fold_errors<B: Backend>(backend: &B) -> Outcome {
    let baseline = backend.memory().live;
    let length = |e: &Error| matches!(e, Error::LengthMismatch { .. });
    let invalid = |e: &Error| matches!(e, Error::InvalidArgument(_));
    let big = MAX_EXTENSION_DEGREE + 1;
    let cases: Vec<FoldCase<'_>> = vec![
        ("no challenge", 8, 0, 4, None, &invalid),
        ("a challenge that is not square", 8, 3, 4, None, &invalid),
        ("a degree above MAX_EXTENSION_DEGREE", 4 * big, big * big, 2 * big, None, &invalid),
        ("an output that is not whole elements", 8, 4, 3, None, &invalid),
        ("a folded length that is not a power of two", 12, 4, 6, None, &invalid),
        ("an input that is not twice the output", 10, 4, 4, None, &length),
        ("an addend of the wrong length", 8, 4, 4, Some((2, 4)), &length),
        ("an addend challenge of the wrong size", 8, 4, 4, Some((4, 1)), &length),
    ];
    for (what, input_len, beta_len, out_len, addend, pred) in cases {
        let input = backend.upload(&vec![3; input_len]).ctx("upload")?;
        let mut out = backend.upload(&vec![7; out_len]).ctx("upload the output")?;
        let addend_buf = backend.upload(&vec![5; addend.map_or(0, |a| a.0)]).ctx("upload the addend")?;
        let gamma = vec![1; addend.map_or(0, |a| a.1)];
        let what = format!("fri_fold with {what}");
        let result = backend.fri_fold(&input, &vec![1; beta_len], addend.map(|_| (&addend_buf, &gamma[..])), &mut out);
        expect_error(result, &what, pred)?;
        let after = backend.download_vec(&out).ctx("download")?;
        ensure!(after.iter().all(|&x| x == 7), "{what}: a refused call wrote its output");
    }
    // The largest degree is accepted (or the fold is unsupported).
    let input = backend.upload(&[3; 2 * MAX_EXTENSION_DEGREE]).ctx("upload")?;
    let mut out = backend.alloc(MAX_EXTENSION_DEGREE).ctx("alloc")?;
    let result = backend.fri_fold(&input, &[1; MAX_EXTENSION_DEGREE * MAX_EXTENSION_DEGREE], None, &mut out);
    if !result.as_ref().is_err_and(Error::is_unsupported) {
        result.ctx("fri_fold of one element of the largest degree")?;
    }
    drop((input, out));
    ensure_live(backend, baseline, "fri_fold_errors")
}

/// Reductions (rows, cols, degree, points) of the random check: one row, one column, degree 1, a
/// quadratic extension at two points (a STARK's trace), every point count, the largest degree,
/// odd widths.
const REDUCTIONS: &[(usize, usize, usize, usize)] = &[
    (1, 1, 1, 1),
    (2, 3, 2, 2),
    (16, 5, 2, 2),
    (64, 17, 3, 1),
    (32, 2, 2, MAX_REDUCTION_POINTS),
    (8, 4, MAX_EXTENSION_DEGREE, 3),
    (1024, 33, 2, 2),
];

/// The multiplication matrix of `a + b u` in `F[u] / (u^2 - 7)` (7 is not a square mod p), in
/// the basis `(1, u)`: a point of a field extension, as a PCS's points are.
fn quadratic_point(a: u64, b: u64) -> Vec<u64> {
    vec![a, reference::mul(7, b), b, a]
}

/// Reductions of random matrices, coefficients and points (non-canonical values included;
/// random matrices as points, and points of a quadratic field extension), into a fresh
/// accumulator and onto a random one, against the reference; every output canonical and the
/// matrix unchanged.
///
/// # Errors
/// The first reduction whose output differs.
pub fn reduce_openings_random<B: Backend>(backend: &B) -> Outcome {
    let mut g = Gen::new("reduce_openings_random");
    let baseline = backend.memory().live;
    for &(rows, cols, d, n) in REDUCTIONS {
        let shape = MatrixShape::new(rows, cols).ctx("shape")?;
        let host = g.matrix(shape.len());
        let matrix = backend.upload(&host).ctx("upload")?;
        let coeffs = g.matrix(d * cols);
        let shift = g.element();
        let raw: Vec<(Vec<u64>, Vec<u64>, Vec<u64>)> = (0..n)
            .map(|i| {
                let z = if d == 2 && i % 2 == 0 { quadratic_point(g.element(), g.element()) } else { g.matrix(d * d) };
                (z, g.matrix(d), g.matrix(d * d))
            })
            .collect();
        let points: Vec<ReductionPoint> =
            raw.iter().map(|(z, y, s)| ReductionPoint::new(z, y, s)).collect::<Result<_, _>>().ctx("points")?;
        let refs: Vec<reference::OpeningPoint<'_>> = raw.iter().map(|(z, y, s)| (&z[..], &y[..], &s[..])).collect();
        for accumulate in [false, true] {
            let before = g.matrix(rows * d);
            let mut acc = backend.upload(&before).ctx("upload the accumulator")?;
            let call = ReductionCall { coeffs: &coeffs, shift, points: &points, accumulate };
            let result = backend.reduce_openings(&matrix, shape, &call, &mut acc);
            if let Some(skip) = skipped(backend, "reduce_openings_random", &result) {
                return skip;
            }
            let what = format!(
                "reduce_openings of {shape}, degree {d}, {n} point(s){}",
                if accumulate { ", accumulating" } else { "" }
            );
            result.ctx(&what)?;
            let expected =
                reference::reduce_openings(&host, cols, &coeffs, shift, &refs, accumulate.then_some(&before[..]));
            ensure_words_eq(&what, &expected, &backend.download_vec(&acc).ctx("download")?)?;
        }
        ensure_words_eq(
            format!("reduce_openings of {shape}: the matrix afterwards"),
            &host,
            &backend.download_vec(&matrix).ctx("download")?,
        )?;
    }
    ensure_live(backend, baseline, "reduce_openings_random")
}

/// Every refusal of the reduction's checked front, with the typed error and the accumulator
/// untouched; the largest call is accepted.
///
/// # Errors
/// The first call that is accepted, or refused with another error, or that wrote its accumulator.
pub fn reduce_openings_errors<B: Backend>(backend: &B) -> Outcome {
    let baseline = backend.memory().live;
    let length = |e: &Error| matches!(e, Error::LengthMismatch { .. });
    let invalid = |e: &Error| matches!(e, Error::InvalidArgument(_));
    let point = |z: u64| ReductionPoint::new(&quadratic_point(z, 1), &[1, 2], &[1, 0, 0, 1]);
    let p2 = [point(3).ctx("point")?, point(5).ctx("point")?];
    // A point of the coset 7 <w_8>: the scalar 7 w_8^3 (row 3's point).
    let on = reference::mul(7, reference::pow(reference::root_of_unity(8), 3));
    let singular = ReductionPoint::new(&[on, 0, 0, on], &[1, 2], &[1, 0, 0, 1]).ctx("point")?;
    let other_degree = ReductionPoint::new(&[2], &[1], &[1]).ctx("point")?;
    let five = vec![p2[0].clone(); MAX_REDUCTION_POINTS + 1];
    // (what, rows, cols, matrix length, coefficients, points, accumulator length, error)
    type Case<'a> = (&'a str, usize, usize, usize, usize, Vec<ReductionPoint>, usize, &'a Expected);
    let cases: Vec<Case<'_>> = vec![
        ("a matrix shorter than its shape", 8, 3, 23, 6, p2.to_vec(), 16, &length),
        ("a height that is not a power of two", 6, 3, 18, 6, p2.to_vec(), 12, &invalid),
        ("coefficients that are not d vectors of cols", 8, 3, 24, 5, p2.to_vec(), 16, &length),
        ("no point", 8, 3, 24, 6, vec![], 16, &invalid),
        ("more than MAX_REDUCTION_POINTS points", 8, 3, 24, 6, five, 16, &invalid),
        ("points of two degrees", 8, 3, 24, 6, vec![p2[0].clone(), other_degree], 16, &invalid),
        ("a point on the coset", 8, 3, 24, 6, vec![p2[0].clone(), singular], 16, &invalid),
        ("an accumulator of the wrong length", 8, 3, 24, 6, p2.to_vec(), 15, &length),
    ];
    for (what, rows, cols, len, coeffs, points, acc_len, pred) in cases {
        let matrix = backend.upload(&vec![3; len]).ctx("upload")?;
        let mut acc = backend.upload(&vec![7; acc_len]).ctx("upload the accumulator")?;
        let shape = MatrixShape::new(rows, cols).ctx("shape")?;
        let call = ReductionCall { coeffs: &vec![1; coeffs], shift: 7, points: &points, accumulate: true };
        let what = format!("reduce_openings with {what}");
        expect_error(backend.reduce_openings(&matrix, shape, &call, &mut acc), &what, pred)?;
        let after = backend.download_vec(&acc).ctx("download")?;
        ensure!(after.iter().all(|&x| x == 7), "{what}: a refused call wrote its accumulator");
    }
    // The largest degree at the most points is accepted (or the reduction is unsupported).
    let d = MAX_EXTENSION_DEGREE;
    let z: Vec<u64> = (0..d * d).map(|i| if i % (d + 1) == 0 { 3 } else { 1 }).collect();
    let big = ReductionPoint::new(&z, &[1; MAX_EXTENSION_DEGREE], &z).ctx("point")?;
    let points = vec![big; MAX_REDUCTION_POINTS];
    let matrix = backend.upload(&[5; 4]).ctx("upload")?;
    let mut acc = backend.alloc(2 * d).ctx("alloc")?;
    let call = ReductionCall { coeffs: &[1; 2 * MAX_EXTENSION_DEGREE], shift: 7, points: &points, accumulate: false };
    let result = backend.reduce_openings(&matrix, MatrixShape::new(2, 2).ctx("shape")?, &call, &mut acc);
    if !result.as_ref().is_err_and(Error::is_unsupported) {
        result.ctx("reduce_openings of the largest degree at the most points")?;
    }
    drop((matrix, acc));
    ensure_live(backend, baseline, "reduce_openings_errors")
}
