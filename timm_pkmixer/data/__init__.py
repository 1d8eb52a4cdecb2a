"""The data a run trains on: where it comes from (`datasets`: a recipe's data source, STL-10 as an ImageFolder),
Fashion-MNIST prepared from Debian's package or torchvision's download (`fashion_mnist`), and the demo's subset or
synthetic shapes (`demo_data`). Imports only the model core."""
