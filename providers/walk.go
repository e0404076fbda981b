package providers

import "context"

// Walk calls fn for every object under prefix, in the store's listing
// order, page by page, and stops at the first error of the listing or fn.
func Walk(ctx context.Context, s Store, prefix string, fn func(Attrs) error) error {
	for page := ""; ; {
		p, err := s.List(ctx, prefix, page, 1000)
		if err != nil {
			return err
		}
		for _, a := range p.Objects {
			if err := fn(a); err != nil {
				return err
			}
		}
		if page = p.NextToken; page == "" {
			return nil
		}
	}
}
