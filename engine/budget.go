package engine

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/acpflow/acpflow/steps"
)

// Budget is what a run (a workflow's `budget:`) or a batch (`run
// --budget`) may spend, as its agents report it; a zero field is no limit.
// Exceeding it cancels what runs and starts nothing more
// (docs/workflow.md#budget).
type Budget struct {
	Tokens int64       // the sum of total_tokens
	Cost   *steps.Cost // the sum of costs in Cost.Currency
}

// IsZero reports whether the budget limits nothing.
func (b Budget) IsZero() bool { return b.Tokens == 0 && b.Cost == nil }

// ErrBudgetExceeded is what every error of Check is (errors.Is).
var ErrBudgetExceeded = errors.New("budget exceeded")

// budgetError is Check's error: its own words, and ErrBudgetExceeded.
type budgetError struct{ msg string }

func (e budgetError) Error() string        { return e.msg }
func (e budgetError) Is(target error) bool { return target == ErrBudgetExceeded }

// Check returns why spent is over the budget, or nil. what names the
// budget in the error ("" for a run's, "batch" for a batch's). A cost in
// another currency than the budget's is an error of its own: it cannot be
// counted, and ignoring it would spend without limit.
func (b Budget) Check(what string, spent *steps.Usage) error {
	name := "budget"
	if what != "" {
		name = what + " budget"
	}
	if spent == nil {
		return nil
	}
	if n, ok := spent.Tokens(); ok && b.Tokens > 0 && n > b.Tokens {
		return budgetError{fmt.Sprintf("%s exceeded: %s tokens of %s", name, Thousands(n), Thousands(b.Tokens))}
	}
	if b.Cost != nil && spent.Cost != nil {
		if spent.Cost.Currency != b.Cost.Currency {
			return budgetError{fmt.Sprintf("%s: cost is limited in %s, but an agent reported a cost in %q, which cannot be counted against it", name, b.Cost.Currency, spent.Cost.Currency)}
		}
		if spent.Cost.Amount > b.Cost.Amount {
			return budgetError{fmt.Sprintf("%s exceeded: %s of %s", name, FormatCost(*spent.Cost), FormatCost(*b.Cost))}
		}
	}
	return nil
}

// Reached is Check for a budget that may not be spent any further: it
// returns why once spent has used the whole budget (not only gone over
// it), so that the model gateway refuses the request that would go over.
func (b Budget) Reached(what string, spent *steps.Usage) error {
	if err := b.Check(what, spent); err != nil || spent == nil {
		return err
	}
	name := "budget"
	if what != "" {
		name = what + " budget"
	}
	if n, ok := spent.Tokens(); ok && b.Tokens > 0 && n >= b.Tokens {
		return budgetError{fmt.Sprintf("%s reached: %s tokens of %s", name, Thousands(n), Thousands(b.Tokens))}
	}
	if b.Cost != nil && spent.Cost != nil && spent.Cost.Amount >= b.Cost.Amount {
		return budgetError{fmt.Sprintf("%s reached: %s of %s", name, FormatCost(*spent.Cost), FormatCost(*b.Cost))}
	}
	return nil
}

// String is the budget as `--budget` takes it: tokens=N,cost=XCUR.
func (b Budget) String() string {
	var parts []string
	if b.Tokens > 0 {
		parts = append(parts, "tokens="+strconv.FormatInt(b.Tokens, 10))
	}
	if b.Cost != nil {
		parts = append(parts, "cost="+strconv.FormatFloat(b.Cost.Amount, 'f', -1, 64)+b.Cost.Currency)
	}
	return strings.Join(parts, ",")
}

// Thousands writes n with a comma between groups of three digits.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// FormatCost writes a cost as "0.0123 USD": at least two decimals, as
// many as it has up to six; an amount of a billion or more (or one that
// is not finite) in six significant digits, "1.5e+12 USD", so that no
// amount takes more than a few characters.
func FormatCost(c steps.Cost) string {
	if math.Abs(c.Amount) >= 1e9 || math.IsNaN(c.Amount) {
		return strconv.FormatFloat(c.Amount, 'g', 6, 64) + " " + c.Currency
	}
	s := strconv.FormatFloat(c.Amount, 'f', 6, 64)
	s = strings.TrimRight(s, "0")
	if i := strings.IndexByte(s, '.'); i < 0 {
		s += ".00"
	} else if len(s)-i-1 < 2 {
		s += strings.Repeat("0", 2-(len(s)-i-1))
	}
	return s + " " + c.Currency
}

// RunUsage is a run's usage: the sum over its steps of what they
// reported, and how many steps ran without reporting any token count.
type RunUsage struct {
	steps.Usage
	// UnreportedSteps counts the steps that ran (attempts > 0) and whose
	// agent reported no token count: the sums leave them out.
	UnreportedSteps int `json:"unreported_steps,omitempty"`
}

// SumUsage sums step usages into a run's: nil when no step reported
// anything. ran says whether a step ran at all (a skipped step is not
// unreported).
func SumUsage(stepUsages []*steps.Usage, ran []bool) *RunUsage {
	sum := &RunUsage{}
	any := false
	for i, u := range stepUsages {
		if !u.Empty() {
			any = true
			sum.Add(u)
		}
		if _, ok := u.Tokens(); !ok && ran[i] {
			sum.UnreportedSteps++
		}
	}
	if !any {
		return nil
	}
	sum.ContextTokens, sum.ContextSize = nil, nil
	return sum
}

// meter follows what a run's step attempts report as they run (each
// attempt's latest steps.UsageReport) and what settled attempts reported,
// and tells the run when its budget is exceeded. onTotal, when set, hears
// the run's total at each change (a batch's budget).
type meter struct {
	budget  Budget
	exceed  func(error) // cancels the run: once
	onTotal func(*steps.Usage)
	// batch is the batch's Reached (nil: no batch budget).
	batch func() error

	mu      sync.Mutex
	settled steps.Usage
	live    map[*attemptUsage]*steps.Usage
	once    sync.Once
}

// attemptUsage is one attempt's place in the meter.
type attemptUsage struct{ m *meter }

func newMeter(b Budget, exceed func(error), onTotal func(*steps.Usage)) *meter {
	return &meter{budget: b, exceed: exceed, onTotal: onTotal, live: map[*attemptUsage]*steps.Usage{}}
}

// attempt opens an attempt's place.
func (m *meter) attempt() *attemptUsage { return &attemptUsage{m: m} }

// report is the attempt's usage so far.
func (a *attemptUsage) report(u *steps.Usage) {
	if b := a.m.budget.Cost; b != nil && u.Cost != nil && u.Cost.Currency != b.Currency {
		err := (Budget{Cost: b}).Check("", &steps.Usage{Cost: u.Cost})
		a.m.once.Do(func() { a.m.exceed(err) })
	}
	a.m.mu.Lock()
	a.m.live[a] = u.Clone()
	a.m.mu.Unlock()
	a.m.check()
}

// done settles the attempt with its final usage (nil: none).
func (a *attemptUsage) done(u *steps.Usage) {
	a.m.mu.Lock()
	delete(a.m.live, a)
	a.m.settled.Add(u)
	a.m.mu.Unlock()
	if u != nil {
		a.m.check()
	}
}

// total is everything reported so far, live attempts included.
func (m *meter) total() *steps.Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.settled.Clone()
	for _, u := range m.live {
		t.Add(u)
	}
	t.ContextTokens, t.ContextSize = nil, nil
	return t
}

// addSettled counts usage recorded before the run started (the steps a
// resume keeps): they were spent on the run too.
func (m *meter) addSettled(u *steps.Usage) {
	m.mu.Lock()
	m.settled.Add(u)
	m.mu.Unlock()
}

// reached is the run's budget check for one more model request
// (steps.Invocation.BudgetReached): the run's, then the batch's.
func (m *meter) reached() error {
	if err := m.budget.Reached("", m.total()); err != nil {
		return err
	}
	if m.batch != nil {
		return m.batch()
	}
	return nil
}

func (m *meter) check() {
	t := m.total()
	if m.onTotal != nil {
		m.onTotal(t)
	}
	if err := m.budget.Check("", t); err != nil {
		m.once.Do(func() { m.exceed(err) })
	}
}

// usageSink passes a step attempt's events on, and its usage reports to
// the meter as well.
type usageSink struct {
	steps.Sink
	a *attemptUsage
}

func (s usageSink) Emit(e steps.Event) {
	if u, ok := e.Data.(steps.UsageReport); ok {
		s.a.report(&u.Usage)
	}
	s.Sink.Emit(e)
}

// ParseBudget reads a budget as `--budget` takes it: comma-separated
// tokens=N (a positive whole number; 100000 or 100_000) and cost=AMOUNTCUR
// (5USD, 0.50EUR: an amount greater than 0 and an ISO 4217 code).
func ParseBudget(s string) (Budget, error) {
	var b Budget
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case seen[key]:
			return b, fmt.Errorf("budget %q: %s given twice: give each limit once", s, key)
		case !ok:
			return b, fmt.Errorf("budget %q: want tokens=N and/or cost=AMOUNTCUR (e.g. tokens=100000,cost=5USD)", s)
		case key == "tokens":
			n, err := strconv.ParseInt(strings.ReplaceAll(val, "_", ""), 10, 64)
			if err != nil || n < 1 {
				return b, fmt.Errorf("budget tokens=%s: want a whole number of at least 1", val)
			}
			b.Tokens, seen[key] = n, true
		case key == "cost":
			i := strings.IndexFunc(val, func(r rune) bool { return r >= 'A' && r <= 'Z' })
			if i <= 0 || len(val)-i != 3 || strings.ToUpper(val[i:]) != val[i:] {
				return b, fmt.Errorf("budget cost=%s: want an amount and an ISO 4217 currency, e.g. cost=5USD", val)
			}
			x, err := strconv.ParseFloat(val[:i], 64)
			if err != nil || !(x > 0) {
				return b, fmt.Errorf("budget cost=%s: want an amount greater than 0, e.g. cost=5USD", val)
			}
			b.Cost, seen[key] = &steps.Cost{Amount: x, Currency: val[i:]}, true
		default:
			return b, fmt.Errorf("budget %q: unknown limit %q: want tokens or cost", s, key)
		}
	}
	return b, nil
}

// BatchMeter follows what a batch's runs report (engine.Options.OnUsage)
// against the batch's budget: the total is each run's latest.
type BatchMeter struct {
	budget Budget
	exceed func(error)

	mu   sync.Mutex
	runs map[string]*steps.Usage
	once sync.Once
}

// NewBatchMeter meters budget, calling exceed once when it is exceeded.
// recorded is what the batch's runs spent before (a resumed batch's, by
// run id; nil: nothing): a run resumed replaces its entry with its new
// total, which counts its kept steps again.
func NewBatchMeter(budget Budget, recorded map[string]*steps.Usage, exceed func(error)) *BatchMeter {
	m := &BatchMeter{budget: budget, exceed: exceed, runs: map[string]*steps.Usage{}}
	for id, u := range recorded {
		m.runs[id] = u.Clone()
	}
	return m
}

// Run is engine.Options.OnUsage: run runID's total so far.
func (m *BatchMeter) Run(runID string, total *steps.Usage) {
	m.mu.Lock()
	m.runs[runID] = total.Clone()
	m.mu.Unlock()
	m.Check()
}

// Reached says why the batch may not spend more (its budget is used
// whole), or nil.
func (m *BatchMeter) Reached() error {
	return m.budget.Reached("batch", m.Total())
}

// Total is everything the batch's runs reported.
func (m *BatchMeter) Total() *steps.Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &steps.Usage{}
	for _, u := range m.runs {
		t.Add(u)
	}
	return t
}

// Check calls exceed (once) if the budget is exceeded, and says so.
func (m *BatchMeter) Check() error {
	err := m.budget.Check("batch", m.Total())
	if err != nil {
		m.once.Do(func() { m.exceed(err) })
	}
	return err
}
