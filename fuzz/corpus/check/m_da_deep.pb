@úZH"˜Rnb’bbŒb‰b†bƒb€b~b|bzbxbvbtbrbpbnblbjbhbfbdbbb`b^b\bZbXbVbTbRbPbNbLbJbHbFbDbBb@b>b<b:b8b6b4b2b0b.b,b*b(b&b$b"b bbbbbbbbbbb
bbbb P