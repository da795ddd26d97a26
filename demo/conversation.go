package demo

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/historyd/historyd/langgraph/write"
)

// The session-state keys the sketch tool writes, in the order it writes
// them. Turn 2 rewrites all three.
const (
	// KeyArea holds the sketch's area in km² (a float).
	KeyArea = "sketch-ops/sketch_area/area_km2"
	// KeyName holds the name the user gave the sketch.
	KeyName = "sketch-ops/sketch_area/name"
	// KeyFeature holds the sketch as a GeoJSON Feature with a Polygon of a
	// few hundred points.
	KeyFeature = "sketch-ops/sketch_area/feature"
)

// toolName is the tool that writes the keys.
const toolName = "sketch_area"

// modelName is what the scripted model reports in response_metadata.
const modelName = "scripted-demo-model"

// sketch is one call of the sketch tool: what the model asks for and the
// boundary the tool comes back with.
type sketch struct {
	name    string  // the name the user gave the sketch
	region  string  // what the model asked to sketch around
	areaKm2 float64 // the area the tool reports
	shape   outline
}

// modelStep is one answer of the model: a call of the sketch tool, or,
// when call is nil, the plain answer that ends the turn.
type modelStep struct {
	call   *sketch
	answer string
}

// turnScript is one user question and what the model does with it.
type turnScript struct {
	question string
	steps    []modelStep
}

var severn = &sketch{
	name:    "Severn",
	region:  "Severn catchment",
	areaKm2: 11420.0,
	shape: outline{
		lon0: -2.78, lat0: 52.25, rx: 1.0, ry: 1.25, tilt: 20 * math.Pi / 180, vertices: 360,
		harmonics: []harmonic{{2, 0.10, 0.3}, {3, 0.07, 1.1}, {5, 0.04, 2.0}, {11, 0.015, 0.5}, {23, 0.006, 1.7}},
	},
}

var thames = &sketch{
	name:    "Thames",
	region:  "Thames catchment",
	areaKm2: 12935.0,
	shape: outline{
		lon0: -0.95, lat0: 51.62, rx: 1.9, ry: 1.0, tilt: -8 * math.Pi / 180, vertices: 420,
		harmonics: []harmonic{{2, 0.06, 2.4}, {3, 0.09, 0.2}, {4, 0.05, 1.3}, {9, 0.02, 2.9}, {17, 0.008, 0.4}},
	},
}

// script is the demo conversation. Turn 2 rewrites every key turn 1
// wrote, so the state at the end of turns 2 to 4 no longer holds the
// Severn values: only the turn history does. Turn 3 shows what a model
// reading the present state alone can say, and turn 4 asks for a turn the
// thread never had.
var script = []turnScript{
	{
		question: "sketch a rough boundary around the Severn catchment and call it Severn",
		steps: []modelStep{
			{call: severn},
			{answer: `Done: I sketched a rough boundary around the Severn catchment and saved it as "Severn". It comes out at about 11,420 km².`},
		},
	},
	{
		question: "now sketch one around the Thames and call it Thames",
		steps: []modelStep{
			{call: thames},
			{answer: `Done: the Thames sketch is saved as "Thames" and comes out at about 12,935 km².`},
		},
	},
	{
		question: "confirm from state what area each of the two sketches came out at",
		steps: []modelStep{
			{answer: "Session state only holds the latest sketch: " + KeyName + ` is "Thames" and ` + KeyArea +
				" is 12,935 km². The Severn sketch wrote the same keys and was replaced, so I can't confirm its area from the current state."},
		},
	},
	{
		question: "what did that key hold at turn 7?",
		steps: []modelStep{
			{answer: "This conversation has had 4 turns, so there is no turn 7: " + KeyArea + " held nothing then."},
		},
	},
}

// Questions returns the user's question of each turn of both threads, in
// turn order.
func Questions() []string {
	out := make([]string, len(script))
	for i, t := range script {
		out[i] = t.question
	}
	return out
}

// arguments are the tool call's arguments as the model gives them.
func (s *sketch) arguments() write.Map {
	return write.Map{{Key: "name", Value: s.name}, {Key: "region", Value: s.region}}
}

// inputs records where each argument came from: the model, for both.
func (s *sketch) inputs() write.Map {
	return write.Map{{Key: "name", Value: "model"}, {Key: "region", Value: "model"}}
}

// feature is the sketch's boundary as a GeoJSON Feature.
func (s *sketch) feature() write.Map {
	ring := s.shape.ring(s.areaKm2)
	return write.Map{
		{Key: "type", Value: "Feature"},
		{Key: "properties", Value: write.Map{{Key: "name", Value: s.name}}},
		{Key: "geometry", Value: write.Map{
			{Key: "type", Value: "Polygon"},
			{Key: "coordinates", Value: [][][]float64{ring}},
		}},
	}
}

// values are the keys the tool writes and their values, in writing order.
func (s *sketch) values() write.Map {
	return write.Map{
		{Key: KeyArea, Value: s.areaKm2},
		{Key: KeyName, Value: s.name},
		{Key: KeyFeature, Value: s.feature()},
	}
}

// report is the ToolMessage text the tool answers with.
func (s *sketch) report() string {
	keys := make([]string, 0, 3)
	for _, f := range s.values() {
		keys = append(keys, f.Key)
	}
	return fmt.Sprintf("Sketched %q: a %d-point boundary around the %s, %.1f km². State updated: %s.",
		s.name, s.shape.vertices+1, s.region, s.areaKm2, strings.Join(keys, ", "))
}

// outline is a smooth, irregular closed shape: an ellipse whose radius
// wobbles with a few harmonics, tilted, centred on a point, and scaled so
// that its area is the one the tool reports.
type outline struct {
	lon0, lat0 float64 // centre, degrees
	rx, ry     float64 // relative half-axes before scaling
	tilt       float64 // rotation, radians, counterclockwise
	vertices   int     // distinct points; the ring repeats the first
	harmonics  []harmonic
}

// harmonic adds amp·sin(k·θ + phase) to the relative radius.
type harmonic struct {
	k     int
	amp   float64
	phase float64
}

// kmPerDegree is the length of one degree of latitude, and of longitude at
// the equator, on the sphere the sketch is drawn on.
const kmPerDegree = 111.32

// ring returns the closed GeoJSON ring, [lon, lat] pairs rounded to five
// decimals (about a metre), counterclockwise as RFC 7946 asks of exterior
// rings, enclosing about areaKm2 on an equirectangular projection around
// the centre.
func (o outline) ring(areaKm2 float64) [][]float64 {
	xs := make([]float64, o.vertices)
	ys := make([]float64, o.vertices)
	sin, cos := math.Sincos(o.tilt)
	for i := range o.vertices {
		a := 2 * math.Pi * float64(i) / float64(o.vertices)
		r := 1.0
		for _, h := range o.harmonics {
			r += h.amp * math.Sin(float64(h.k)*a+h.phase)
		}
		x, y := o.rx*r*math.Cos(a), o.ry*r*math.Sin(a)
		xs[i], ys[i] = x*cos-y*sin, x*sin+y*cos
	}
	var twice float64
	for i := range o.vertices {
		j := (i + 1) % o.vertices
		twice += xs[i]*ys[j] - xs[j]*ys[i]
	}
	scale := math.Sqrt(areaKm2 / (math.Abs(twice) / 2))
	kmPerLon := kmPerDegree * math.Cos(o.lat0*math.Pi/180)
	out := make([][]float64, 0, o.vertices+1)
	for i := range o.vertices {
		out = append(out, []float64{
			round5(o.lon0 + scale*xs[i]/kmPerLon),
			round5(o.lat0 + scale*ys[i]/kmPerDegree),
		})
	}
	return append(out, []float64{out[0][0], out[0][1]})
}

func round5(f float64) float64 { return math.Round(f*1e5) / 1e5 }

// Pacing of the conversation, for timestamps that read like a real one.
var (
	userPause   = [2]time.Duration{35 * time.Second, 95 * time.Second}
	stepLatency = [2]time.Duration{2 * time.Millisecond, 9 * time.Millisecond}
	modelTime   = [2]time.Duration{900 * time.Millisecond, 2800 * time.Millisecond}
	toolTime    = [2]time.Duration{40 * time.Millisecond, 260 * time.Millisecond}
)
