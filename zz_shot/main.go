package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/chromedp/chromedp"
)

func main() {
	base := "http://127.0.0.1:8080"
	user, pass, out := os.Args[1], os.Args[2], os.Args[3]
	paths := os.Args[4:]
	for _, w := range []int{1440, 390} {
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath("/usr/bin/chromium"), chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(w, 900))
		actx, c1 := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, c2 := chromedp.NewContext(actx)
		ctx, c3 := context.WithTimeout(ctx, 90*time.Second)
		err := chromedp.Do(ctx, chromedp.Navigate(base+"/login"), chromedp.WaitVisible(`input[name=username]`),
			chromedp.SendKeys(`input[name=username]`, user), chromedp.SendKeys(`input[name=password]`, pass),
			chromedp.Submit(`input[name=password]`), chromedp.WaitVisible(`#jobs`))
		if err != nil {
			fmt.Println("login", err)
			os.Exit(1)
		}
		for i, p := range paths {
			if err := chromedp.Do(ctx, chromedp.Navigate(base+p)); err != nil {
				fmt.Println(p, err)
			}
			time.Sleep(4 * time.Second)
			loc, _ := chromedp.Run(ctx, chromedp.Location())
			buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err != nil {
				fmt.Println("shot", err)
				continue
			}
			name := fmt.Sprintf("%s-%d-%d.png", out, i, w)
			_ = os.WriteFile(name, buf, 0o644)
			fmt.Println(name, "at", loc)
		}
		c3()
		c2()
		c1()
	}
}
