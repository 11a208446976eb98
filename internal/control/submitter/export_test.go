package submitter

// PlaceOnly makes s place runnables and leave them Scheduled, creating
// nothing: the scale benchmarks measure admission alone, over cluster
// records whose objects are never created.
func PlaceOnly(s *Submitter) { s.placeOnly = true }
