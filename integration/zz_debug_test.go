package integration

import (
	"fmt"
	"testing"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

func TestZZDebug(t *testing.T) {
	ctx := newTab(t)
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x2x80")
	_ = chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			fmt.Println("EXC", e.ExceptionDetails.Text, e.ExceptionDetails.Exception.Description)
		case *runtime.EventConsoleAPICalled:
			for _, a := range e.Args {
				fmt.Println("CONSOLE", string(a.Value), a.Description)
			}
		}
	})
	err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/cluster"),
		chromedp.WaitVisible(`input[name=username]`),
		chromedp.SendKeys(`input[name=username]`, "admin"),
		chromedp.SendKeys(`input[name=password]`, "dev"),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`#gpu-wall .gpu-chart canvas`),
	)
	html, err2 := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.ranges[data-chart="gpu-wall"]').outerHTML`))
	fmt.Println("HTML", html, err, err2)
	err = chromedp.Do(ctx, chromedp.Click(`.ranges[data-chart="gpu-wall"] button[data-range="24h"]`))
	fmt.Println("click", err)
	res, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("gpu-wall-history") ? document.getElementById("gpu-wall-history").outerHTML.slice(0,300) : "none"`))
	fmt.Println("RES", res, err)
}
